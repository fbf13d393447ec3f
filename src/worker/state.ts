import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { removeContainer } from './executor';
import { bootId, groupAlive, readStat, signalGroup } from './proc';

/** What the worker keeps about a running job, to kill it after a crash. */
export interface JobRecord {
  /** The job's process group (and session): its leader's pid. */
  pgid: number;
  /** The leader's start time (clock ticks since boot), to tell it from a later process given the same pid. */
  startTicks: number | null;
  /** The job's cgroup directory, if it has one. */
  cgroup: string | null;
  /** The job's container, if it runs in one. */
  container?: { runtime: string; name: string } | null;
}

interface StateFile {
  boot_id: string | null;
  jobs: Record<string, JobRecord>;
}

/**
 * The worker's state file (`<work dir>/<worker id>/state.json`): the process groups of the jobs it runs, rewritten
 * (atomically: a temporary file renamed over it) after a job starts or ends. A worker restarted after a crash
 * reads it to kill what its previous process left running.
 *
 * Writes are asynchronous and coalesced: one write in flight, then one more with every change made meanwhile. A
 * rename over an existing file costs a flush on ext4 (several ms on a busy disk): done synchronously twice per job,
 * it held up the worker's event loop (and the embedded worker's server) for every job. The price is a window of a
 * few milliseconds after a job starts in which a crash of the worker would leave it unrecorded.
 */
export class WorkerState {
  private readonly file: string;
  private readonly tmp: string;
  private readonly jobs = new Map<string, JobRecord>();
  private readonly boot = bootId();
  private writing: Promise<void> | null = null;
  private dirty = false;

  /** `onError`: a write that failed (the next change tries again). */
  constructor(
    readonly dir: string,
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, 'state.json');
    this.tmp = `${this.file}.${process.pid}.tmp`;
  }

  /** What the previous process left, if it ran in this boot (after a reboot none of its processes can be alive). */
  previous(): Record<string, JobRecord> {
    try {
      const state = JSON.parse(readFileSync(this.file, 'utf8')) as StateFile;
      if (state.boot_id !== this.boot) return {};
      return state.jobs ?? {};
    } catch {
      return {};
    }
  }

  /** Records a running job; the file is written soon after (`flushed()` waits for it). */
  add(submissionId: string, record: JobRecord): void {
    this.jobs.set(submissionId, record);
    this.schedule();
  }

  remove(submissionId: string): void {
    this.jobs.delete(submissionId);
    this.schedule();
  }

  /** Forgets everything (after the previous process's jobs were dealt with), on disk before it returns. */
  reset(): void {
    this.jobs.clear();
    writeFileSync(this.tmp, this.content(), { mode: 0o600 });
    renameSync(this.tmp, this.file);
  }

  /** Settles once every change made so far is on disk (or its write failed). */
  async flushed(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private content(): string {
    const state: StateFile = { boot_id: this.boot, jobs: Object.fromEntries(this.jobs) };
    return JSON.stringify(state);
  }

  private schedule(): void {
    this.dirty = true;
    this.writing ??= this.writeLoop();
  }

  private async writeLoop(): Promise<void> {
    try {
      while (this.dirty) {
        this.dirty = false;
        await writeFile(this.tmp, this.content(), { mode: 0o600 });
        await rename(this.tmp, this.file);
      }
    } catch (err) {
      this.onError(err);
    } finally {
      // In the same turn as the last look at `dirty`: a change from now on starts a new write.
      this.writing = null;
    }
  }
}

/**
 * Kills a job left by a previous worker process: its whole process group, if the group is still that job's (the
 * leader, if alive, started when recorded; a pid in use as a group id is never given to a new process, so a group
 * whose leader is gone is still the job's), and its cgroup. Waits up to `waitMs` for the group to be gone; returns
 * whether it is.
 */
export async function killOrphan(record: JobRecord, waitMs = 5000): Promise<boolean> {
  const leader = readStat(record.pgid);
  const ours = !leader || record.startTicks === null || leader.startTicks === record.startTicks;
  if (ours) signalGroup(record.pgid, 'SIGKILL');
  if (record.container) removeContainer(record.container.runtime, record.container.name);
  if (record.cgroup && existsSync(join(record.cgroup, 'cgroup.kill'))) {
    try {
      writeFileSync(join(record.cgroup, 'cgroup.kill'), '1');
    } catch {
      /* gone meanwhile */
    }
  }
  const until = Date.now() + waitMs;
  while (ours && groupAlive(record.pgid) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
  if (record.cgroup) {
    try {
      rmdirSync(record.cgroup);
    } catch {
      /* gone, or not empty yet */
    }
  }
  return !ours || !groupAlive(record.pgid);
}
