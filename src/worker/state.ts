import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
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
 * (atomically: a temporary file renamed over it) whenever a job starts or ends. A worker restarted after a crash
 * reads it to kill what its previous process left running.
 */
export class WorkerState {
  private readonly file: string;
  private readonly jobs = new Map<string, JobRecord>();

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, 'state.json');
  }

  /** What the previous process left, if it ran in this boot (after a reboot none of its processes can be alive). */
  previous(): Record<string, JobRecord> {
    try {
      const state = JSON.parse(readFileSync(this.file, 'utf8')) as StateFile;
      if (state.boot_id !== bootId()) return {};
      return state.jobs ?? {};
    } catch {
      return {};
    }
  }

  add(submissionId: string, record: JobRecord): void {
    this.jobs.set(submissionId, record);
    this.write();
  }

  remove(submissionId: string): void {
    this.jobs.delete(submissionId);
    this.write();
  }

  /** Forgets everything (after the previous process's jobs were dealt with). */
  reset(): void {
    this.jobs.clear();
    this.write();
  }

  private write(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const state: StateFile = { boot_id: bootId(), jobs: Object.fromEntries(this.jobs) };
    writeFileSync(tmp, JSON.stringify(state), { mode: 0o600 });
    renameSync(tmp, this.file);
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
