import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { DataDirLock } from '../infra/database/embedded-postgres';
import { type Capacity, type ClaimedSubmission, TokenRefusedError, WorkerApi } from './api';
import { Execution, type StopCause } from './executor';
import { jobEnvironment } from './job-script';
import type { LogSinkFactory } from './log-sink';
import { LogShipper } from './log-shipper';
import { type MemoryEnforcementOption, MemoryEnforcer, offJob } from './memory';
import { type FinalReport, outcomeOf } from './outcome';
import { readStat } from './proc';
import { killOrphan, WorkerState } from './state';

export interface WorkerOptions {
  url: string;
  token: string;
  workerId: string;
  /** What this worker may run at once, all jobs together. */
  capacity: Capacity;
  /** Holds `<worker id>/` (state file, jobs' working directories, scripts) and `<worker id>.lock`. */
  workDir: string;
  /** Declared to the server: jobs with an `image` are claimed only when set. */
  containerRuntime?: string;
  heartbeatIntervalS: number;
  pollIntervalS: number;
  stopGraceS: number;
  memoryEnforcement: MemoryEnforcementOption;
  /** Where each job's output goes; default: shipped to the server's log route (LogShipper). */
  sinks?: LogSinkFactory;
  /** The worker id's lock, taken already (Worker.lock); else start() takes it. */
  lock?: DataDirLock;
}

export interface WorkerLog {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
  error(fields: object, msg: string): void;
}

type JobSpec = ClaimedSubmission['spec'];

/** A submission this worker holds: claimed, then running, then being reported. */
interface Job {
  claimed: ClaimedSubmission;
  exec: Execution | null;
  /** The server accepted `running`. */
  started: boolean;
  /** The process is gone: its resources are free again; only the final report is left. */
  reporting: boolean;
  /** A stop asked for before the process started. */
  pendingStop: StopCause | null;
}

const HEARTBEAT_BATCH = 1000;
/** How long a report is retried while the server is unreachable (past it, the lease has lapsed anyway). */
const REPORT_PATIENCE_MS = 10 * 60_000;
/** At shutdown, after the jobs' grace period: how long their last reports may take. */
const SHUTDOWN_REPORT_MS = 5000;

/**
 * The runplane worker: claims what fits its free capacity, runs each submission as a local process (executor.ts),
 * reports `running` and `complete`, and sends one heartbeat per interval for everything it holds, stopping the jobs
 * the server says to stop (cancelled, or no longer held). It speaks only the internal API, over HTTP. A restarted
 * worker first kills what its previous process left running (state.ts) and reports, for each such submission it
 * still holds, `failed`/`instance_unreachable` (as a lapsed lease would end it, only sooner).
 */
export class Worker {
  readonly api: WorkerApi;
  /** Settles with the reason if the worker can't go on (its token refused); it has stopped claiming by then. */
  readonly fatal: Promise<Error>;
  private failWith!: (err: Error) => void;
  private readonly jobs = new Map<string, Job>();
  private readonly finishing = new Set<Promise<void>>();
  /** Each job's output, shipped to the server's log route (the executor closes it before reporting `complete`). */
  private readonly shipLogs: LogSinkFactory = (c) =>
    new LogShipper({ url: this.options.url, token: this.options.token, ...c });
  private readonly memory: MemoryEnforcer;
  private readonly stateDir: string;
  private readonly state: WorkerState;
  private lock: DataDirLock | null = null;
  /** No more claims (stopping, or the token was refused). */
  private stopping = false;
  private stopped: Promise<void> | null = null;
  private stopDeadline = Infinity;
  private wakeClaims: () => void = () => undefined;
  private wakeHeartbeats: () => void = () => undefined;
  private loops: Promise<void>[] = [];
  private lastClaimError = '';

  constructor(
    readonly options: WorkerOptions,
    private readonly log: WorkerLog,
  ) {
    this.api = new WorkerApi(options.url, options.token, options.workerId, (msg) => log.warn({}, msg));
    this.memory = MemoryEnforcer.create(options.memoryEnforcement);
    this.stateDir = join(resolve(options.workDir), options.workerId);
    // A state file that can't be written (disk full) costs only the clean-up after a crash: the jobs go on.
    this.state = new WorkerState(this.stateDir, (err) =>
      log.warn({ err: String(err) }, 'could not write the state file'),
    );
    this.fatal = new Promise((resolve) => (this.failWith = resolve));
  }

  get memoryMode(): string {
    return this.memory.mode;
  }

  /**
   * The lock that keeps two processes from running one worker id in one work dir (`<work dir>/<worker id>.lock`);
   * throws DataDirLockedError naming the process that holds it.
   */
  static lock(workDir: string, workerId: string): DataDirLock {
    return DataDirLock.acquire(join(resolve(workDir), workerId));
  }

  /** Takes the worker id's lock, deals with what a previous process left, then starts claiming. */
  async start(): Promise<void> {
    this.lock = this.options.lock ?? Worker.lock(this.options.workDir, this.options.workerId);
    await this.cleanUpAfterPreviousProcess();
    this.loops = [this.claimLoop(), this.heartbeatLoop()];
  }

  /**
   * Stops claiming, stops every job (SIGTERM, SIGKILL after the grace period) and reports each as interrupted
   * (`failed`/`interrupted_by_no_capacity`, retried under the run's policy), then releases the lock.
   */
  stop(): Promise<void> {
    this.stopped ??= this.stopAll();
    return this.stopped;
  }

  private async stopAll(): Promise<void> {
    this.stopping = true;
    this.stopDeadline = Date.now() + this.options.stopGraceS * 1000 + SHUTDOWN_REPORT_MS;
    this.wakeClaims();
    await this.loops[0];
    for (const job of this.jobs.values()) this.stopJob(job, { kind: 'shutdown' });
    while (this.finishing.size > 0) await Promise.all(this.finishing);
    this.wakeHeartbeats();
    await this.loops[1];
    this.memory.stop();
    await this.state.flushed();
    this.lock?.release();
  }

  /** Submission ids held now (for tests and logs). */
  held(): string[] {
    return [...this.jobs.keys()];
  }

  private free(): Capacity {
    const used = { cpu: 0, memory_mib: 0, gpu: 0 };
    for (const job of this.jobs.values()) {
      if (job.reporting) continue;
      const r = job.claimed.spec.resources;
      used.cpu += r.cpu;
      used.memory_mib += r.memory_mib;
      used.gpu += r.gpu ?? 0;
    }
    const { capacity } = this.options;
    return {
      cpu: Math.max(0, Math.round((capacity.cpu - used.cpu) * 1000) / 1000),
      memory_mib: Math.max(0, capacity.memory_mib - used.memory_mib),
      gpu: Math.max(0, capacity.gpu - used.gpu),
    };
  }

  private async claimLoop(): Promise<void> {
    while (!this.stopping) {
      const free = this.free();
      let claimed = 0;
      if (free.cpu > 0 && free.memory_mib > 0) {
        try {
          // As many as could fit if each took a whole CPU: the server packs by requests (smaller ones leave room,
          // and the next claim comes at once); never hundreds of candidate rows locked for a few slots.
          const limit = Math.min(100, Math.max(1, Math.ceil(free.cpu)));
          const got = await this.api.claim(free, limit, this.options.containerRuntime);
          claimed = got.length;
          for (const s of got) this.launch(s);
          this.lastClaimError = '';
        } catch (err) {
          if (err instanceof TokenRefusedError) return this.fail(err);
          // Once per kind of trouble, not once a second.
          if (String(err) !== this.lastClaimError) this.log.warn({ err: String(err) }, 'claim failed; retrying');
          this.lastClaimError = String(err);
        }
      }
      // More may fit at once after a claim that got something; otherwise wait (a job ending wakes it up).
      if (claimed === 0) await this.pause(this.options.pollIntervalS, (wake) => (this.wakeClaims = wake));
    }
  }

  private async heartbeatLoop(): Promise<void> {
    while (!this.stopping || this.finishing.size > 0) {
      await this.pause(this.options.heartbeatIntervalS, (wake) => (this.wakeHeartbeats = wake));
      const ids = [...this.jobs.keys()];
      for (let i = 0; i < ids.length; i += HEARTBEAT_BATCH) {
        let items;
        try {
          items = await this.api.heartbeat(ids.slice(i, i + HEARTBEAT_BATCH));
        } catch (err) {
          return this.fail(err as Error);
        }
        for (const item of items ?? []) {
          const job = this.jobs.get(item.submission_id);
          if (!job || job.reporting) continue;
          if (!item.held) {
            this.log.warn(
              { submission_id: item.submission_id },
              'submission no longer held: stopping it, not reporting',
            );
            this.stopJob(job, { kind: 'lost' });
          } else if (item.cancel_requested && item.status && item.reason) {
            this.stopJob(job, { kind: 'cancel', status: item.status, reason: item.reason });
          }
        }
      }
    }
  }

  private stopJob(job: Job, cause: StopCause): void {
    if (job.exec) job.exec.stop(cause);
    else job.pendingStop ??= cause;
  }

  private launch(s: ClaimedSubmission): void {
    const job: Job = { claimed: s, exec: null, started: false, reporting: false, pendingStop: null };
    this.jobs.set(s.id, job);
    const finished = this.run(job)
      .catch((err: unknown) => {
        if (err instanceof TokenRefusedError) this.fail(err);
        else this.log.error({ submission_id: s.id, err: String(err) }, 'job handling failed');
      })
      .finally(() => {
        this.jobs.delete(s.id);
        this.finishing.delete(finished);
        this.wakeClaims();
      });
    this.finishing.add(finished);
  }

  private async run(job: Job): Promise<void> {
    const s = job.claimed;
    const spec: JobSpec = s.spec;
    const deadline = () => Math.min(Date.now() + REPORT_PATIENCE_MS, this.stopDeadline);
    if (this.stopping) {
      await this.report(s.id, { status: 'failed', termination_reason: 'failed_to_start_due_to_no_capacity' }, deadline);
      return;
    }
    const image = spec.image;
    const runtime = image !== undefined ? this.options.containerRuntime : undefined;
    if (image !== undefined && !runtime) {
      // The server hands image jobs only to workers that declare a runtime: this is a server that doesn't.
      const why = 'the job asks for an image and this worker has no container runtime';
      await this.report(
        s.id,
        { status: 'failed', termination_reason: 'executor_error', runtime_data: { error: why } },
        deadline,
      );
      return;
    }
    const container =
      runtime && image !== undefined
        ? {
            runtime,
            image,
            name: `runplane-${s.id}`,
            cpu: spec.resources.cpu,
            memoryMib: spec.resources.memory_mib,
            gpu: spec.resources.gpu ?? 0,
          }
        : undefined;
    // A container's runtime enforces its memory; a process's is watched here.
    const memory = container ? offJob : this.memory.forJob(s.id, spec.resources.memory_mib);
    const env = jobEnvironment(process.env, spec.env, s);
    let exec: Execution;
    try {
      exec = await Execution.start({
        name: s.id,
        commands: spec.commands,
        env,
        container,
        containerVariables: Object.keys(env).filter((k) => k in (spec.env ?? {}) || k.startsWith('RUNPLANE_')),
        jobDir: join(this.stateDir, 'jobs', s.id),
        scriptDir: join(this.stateDir, 'scripts'),
        memory,
        sink: (this.options.sinks ?? this.shipLogs)({ submissionId: s.id, workerId: this.options.workerId }),
        maxDurationS: spec.max_duration_s,
        stopGraceS: this.options.stopGraceS,
      });
    } catch (err) {
      memory.release();
      this.log.error({ submission_id: s.id, err: String(err) }, 'could not start the job');
      await this.report(
        s.id,
        { status: 'failed', termination_reason: 'executor_error', runtime_data: { error: String(err) } },
        deadline,
      );
      return;
    }
    job.exec = exec;
    this.state.add(s.id, {
      pgid: exec.pid,
      startTicks: readStat(exec.pid)?.startTicks ?? null,
      cgroup: memory.procsFile ? join(memory.procsFile, '..') : null,
      container: container ? { runtime: container.runtime, name: container.name } : null,
    });
    if (job.pendingStop) exec.stop(job.pendingStop);
    this.log.info(
      {
        submission_id: s.id,
        run_id: s.run_id,
        job_name: s.job_name,
        submission_num: s.submission_num,
        job_pid: exec.pid,
      },
      'job started',
    );
    const running = await this.api.running(
      s.id,
      {
        worker_id: this.options.workerId,
        hostname: hostname(),
        executor: container ? `container (${container.runtime})` : 'process',
        pid: exec.pid,
        memory_enforcement: container ? 'container' : memory.mode,
      },
      deadline,
    );
    if (running === 'accepted') job.started = true;
    else exec.stop({ kind: 'lost' });
    const result = await exec.done;
    job.reporting = true;
    this.state.remove(s.id);
    this.wakeClaims();
    const report = outcomeOf(result, job.started, spec.resources.memory_mib);
    this.log.info(
      { submission_id: s.id, exit_status: result.exitStatus, stopped_by: result.stoppedBy?.kind ?? null },
      report ? `job ended: ${report.status} (${report.termination_reason})` : 'job ended (not reported: not held)',
    );
    if (report) await this.report(s.id, report, deadline);
  }

  private async report(id: string, report: FinalReport, deadline: () => number): Promise<void> {
    const delivery = await this.api.complete(id, report, deadline);
    if (delivery !== 'accepted')
      this.log.warn({ submission_id: id, delivery: delivery ?? 'gave up' }, 'final report not accepted');
  }

  /**
   * Kills what the previous process of this worker id left running (its state file), then reports each such
   * submission it still holds as `failed`/`instance_unreachable`; submissions it no longer holds get no report.
   */
  private async cleanUpAfterPreviousProcess(): Promise<void> {
    const previous = this.state.previous();
    const ids = Object.keys(previous);
    if (ids.length > 0) {
      for (const id of ids) {
        const gone = await killOrphan(previous[id]);
        this.log.warn({ submission_id: id, pgid: previous[id].pgid, gone }, 'killed a job left by a previous process');
      }
      const items = [];
      for (let i = 0; i < ids.length; i += HEARTBEAT_BATCH)
        items.push(...((await this.api.heartbeat(ids.slice(i, i + HEARTBEAT_BATCH))) ?? []));
      for (const item of items.filter((i) => i.held)) {
        await this.report(
          item.submission_id,
          { status: 'failed', termination_reason: 'instance_unreachable', runtime_data: { orphaned: true } },
          () => Date.now() + 30_000,
        );
      }
    }
    this.state.reset();
  }

  private fail(err: Error): void {
    this.log.error({}, err.message);
    this.stopping = true;
    this.wakeClaims();
    this.failWith(err);
  }

  /** Waits `seconds`, or less if woken through the function handed to `register`. */
  private pause(seconds: number, register: (wake: () => void) => void): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, seconds * 1000);
      register(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}
