import { ChildProcess, spawn } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { type ContainerRun, containerCommand, jobScript, parseTimes, WRAPPER } from './job-script';
import type { LogSink } from './log-sink';
import type { JobMemory, MemoryMode } from './memory';
import { signalGroup } from './proc';

/** Why the worker stopped a job (the first reason wins; it decides what is reported). */
export type StopCause =
  | { kind: 'cancel'; status: 'terminated' | 'aborted'; reason: string }
  | { kind: 'max_duration' }
  | { kind: 'memory' }
  | { kind: 'log_quota' }
  /** The server says this worker no longer holds the submission: stop it, report nothing. */
  | { kind: 'lost' }
  /** The worker itself is stopping. */
  | { kind: 'shutdown' };

export interface ExecutionSpec {
  /** Names the job's files (the submission id). */
  name: string;
  commands: readonly string[];
  env: Record<string, string>;
  /** The job's working directory (created empty; removed afterwards). */
  jobDir: string;
  /** Where the worker keeps the job's script and measurements (outside the working directory). */
  scriptDir: string;
  memory: JobMemory;
  /** Run in a container (a job with an image, on a worker with a container runtime); else as a local process. */
  container?: ContainerRun;
  /** With `container`: the variables passed into it by name (their values are in `env`). */
  containerVariables?: string[];
  sink: LogSink;
  maxDurationS?: number;
  /** Between SIGTERM and SIGKILL when the worker stops a job. */
  stopGraceS: number;
}

export interface ExecutionResult {
  /** The job's exit status: its failing command's, or 128 + N when signal N ended it. */
  exitStatus: number;
  wallS: number;
  cpuS: number | null;
  peakMemoryMib: number | null;
  memoryMode: MemoryMode | 'container';
  stoppedBy: StopCause | null;
}

/** How long to wait for the pipes to drain after the process group is gone (a process outside it may hold them). */
const DRAIN_MS = 2000;
const QUOTA_CHECK_MS = 250;

/**
 * One job as a local process: its commands in one bash (job-script.ts), in its own working directory and its own
 * process group (a new session), its output to the log sink. `stop` sends SIGTERM to the whole group and SIGKILL
 * after the grace period; when the job's shell exits, whatever is left in its group (daemons it started) is killed.
 */
export class Execution {
  readonly done: Promise<ExecutionResult>;
  private stoppedBy: StopCause | null = null;
  private exited = false;
  private killTimer: NodeJS.Timeout | null = null;
  private readonly timers: NodeJS.Timeout[] = [];

  /** The job's process id, also its process group and session id. */
  readonly pid: number;
  private readonly stdout: Readable;
  private readonly stderr: Readable;

  private constructor(
    private readonly child: ChildProcess,
    private readonly spec: ExecutionSpec,
    private readonly timesFile: string,
    private readonly started: number,
  ) {
    if (child.pid === undefined || !child.stdout || !child.stderr)
      throw new Error('the job process has no pid or pipes');
    this.pid = child.pid;
    this.stdout = child.stdout;
    this.stderr = child.stderr;
    this.done = this.watch();
  }

  /** Starts the job; rejects if its process could not be started (no bash, working directory not writable). */
  static async start(spec: ExecutionSpec): Promise<Execution> {
    // Asynchronous (the thread pool's), as every file operation per job: the event loop is the embedded worker's
    // server's too.
    await Promise.all([mkdir(spec.jobDir, { recursive: true }), mkdir(spec.scriptDir, { recursive: true })]);
    const script = join(spec.scriptDir, `${spec.name}.sh`);
    const times = join(spec.scriptDir, `${spec.name}.times`);
    // Readable by the container's user too (the image may not run as this worker's user); its directory is not.
    await writeFile(script, jobScript(spec.commands), { mode: spec.container ? 0o644 : 0o600 });
    // A process: the wrapper runs the script itself; a container: the runtime's command, which runs it inside.
    const run = spec.container
      ? ['', ...containerCommand(spec.container, spec.jobDir, script, spec.containerVariables ?? [])]
      : [script];
    const child = spawn(
      'bash',
      ['--noprofile', '--norc', '-c', WRAPPER, 'runplane-job', times, spec.memory.procsFile ?? '', ...run],
      { cwd: spec.jobDir, env: spec.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
    return new Execution(child, spec, times, started);
  }

  /** Stops the job for `cause` (the first cause is kept): SIGTERM to its group, SIGKILL after the grace period. */
  stop(cause: StopCause): void {
    if (this.exited) return;
    this.stoppedBy ??= cause;
    if (cause.kind === 'memory') {
      // Like the kernel's OOM killer: no grace.
      this.kill();
      return;
    }
    if (this.killTimer) return;
    signalGroup(this.pid, 'SIGTERM');
    this.killTimer = setTimeout(() => this.kill(), this.spec.stopGraceS * 1000);
  }

  private kill(): void {
    signalGroup(this.pid, 'SIGKILL');
    this.spec.memory.killAll();
    // The runtime's CLI forwards SIGTERM into the container, but SIGKILL only ends the CLI: remove the container.
    if (this.spec.container) removeContainer(this.spec.container.runtime, this.spec.container.name);
  }

  private async watch(): Promise<ExecutionResult> {
    const { spec, child } = this;
    const drained = [this.pipe(this.stdout, 'stdout'), this.pipe(this.stderr, 'stderr')];
    spec.memory.watch(this.pid, () => this.stop({ kind: 'memory' }));
    if (spec.maxDurationS !== undefined)
      this.timers.push(setTimeout(() => this.stop({ kind: 'max_duration' }), spec.maxDurationS * 1000));
    // The sink learns of the quota from the server, between writes.
    this.timers.push(setInterval(() => this.checkQuota(), QUOTA_CHECK_MS));

    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (c, s) => resolve([c, s])),
    );
    const wallS = (performance.now() - this.started) / 1000;
    this.exited = true;
    if (this.killTimer) clearTimeout(this.killTimer);
    for (const t of this.timers) clearTimeout(t);
    // The job is over: nothing it left behind in its group (or cgroup) may outlive it.
    this.kill();
    // Read the rest of its output whatever the sink's backlog (see pipe): the drain below must not wait on it.
    this.stdout.resume();
    this.stderr.resume();
    await Promise.race([Promise.all(drained), new Promise((r) => setTimeout(r, DRAIN_MS))]);
    this.stdout.destroy();
    this.stderr.destroy();
    if (spec.memory.oomKilled()) this.stoppedBy ??= { kind: 'memory' };
    const result: ExecutionResult = {
      exitStatus: code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0),
      wallS,
      // cgroup: everything that ran in it; else the shell's `times` (what it waited for), else the last sample.
      // A container's CPU time is the runtime's to measure (the wrapper only saw its CLI): not reported.
      cpuS: spec.container
        ? null
        : spec.memory.mode === 'cgroup'
          ? spec.memory.cpuSeconds()
          : ((await readTimes(this.timesFile)) ?? spec.memory.cpuSeconds()),
      peakMemoryMib: spec.memory.peakMib(),
      memoryMode: spec.container ? 'container' : spec.memory.mode,
      stoppedBy: this.stoppedBy,
    };
    spec.memory.release();
    await spec.sink.close();
    await Promise.all([
      rm(spec.jobDir, { recursive: true, force: true }),
      rm(join(spec.scriptDir, `${spec.name}.sh`), { force: true }),
      rm(this.timesFile, { force: true }),
    ]).catch(() => undefined);
    return result;
  }

  private pipe(stream: Readable, name: 'stdout' | 'stderr'): Promise<void> {
    stream.on('data', (chunk: Buffer) => {
      this.spec.sink.write(name, chunk);
      this.checkQuota();
      // The sink is behind: stop reading until it has room (the job blocks on a full pipe meanwhile). Once the
      // job has exited, what is left in the pipe is read at once (the sink holds it): nothing waits on it any more.
      const room = this.exited ? undefined : this.spec.sink.whenWritable?.(name);
      if (room) {
        stream.pause();
        void room.then(() => stream.resume());
      }
    });
    return new Promise((resolve) => {
      stream.once('end', resolve);
      stream.once('close', resolve);
      stream.once('error', () => resolve());
    });
  }

  private checkQuota(): void {
    if (this.spec.sink.quotaExceeded) this.stop({ kind: 'log_quota' });
  }
}

/** `<runtime> rm -f <name>`, in the background; an error (already removed) changes nothing. */
export function removeContainer(runtime: string, name: string): void {
  const child = spawn(runtime, ['rm', '--force', name], { stdio: 'ignore' });
  child.on('error', () => undefined);
  child.unref();
}

async function readTimes(file: string): Promise<number | null> {
  try {
    return parseTimes(await readFile(file, 'utf8'));
  } catch {
    return null;
  }
}
