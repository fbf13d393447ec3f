import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { FINISHED_RUN_STATUSES } from '../src/modules/runs/dto/run-status';
import { UsersService } from '../src/modules/users/users.service';
import { Worker, type WorkerLog } from '../src/worker/worker';
import {
  BenchEnv,
  fmtInt,
  fmtRatio,
  log,
  median,
  mismatchText,
  percentile,
  printTable,
  QUICK,
  TargetResult,
} from './support';

const MiB = 1024 * 1024;
/** Jobs at once: the worker's capacity in jobs of cpu 1 (and the baseline's concurrency). */
const CONCURRENCY = Number(process.env.BENCH_WORKER_CONCURRENCY ?? 8);
const OVERHEAD_JOBS = Number(process.env.BENCH_WORKER_JOBS ?? (QUICK ? 100 : 1000));
const OVERHEAD_ROUNDS = Number(process.env.BENCH_WORKER_ROUNDS ?? (QUICK ? 1 : 3));
const CANCEL_SAMPLES = QUICK ? CONCURRENCY : Math.max(50, Number(process.env.BENCH_CANCEL_SAMPLES ?? 64));
const LOG_BYTES = QUICK ? 8 * MiB : 64 * MiB;
const FOLLOW_LINES = QUICK ? 20 : 100;
/** The suite's server settings (run.ts sets them before the app starts): the quota raised above LOG_BYTES. */
export const WORKER_BENCH_ENV: Record<string, string> = { RUNPLANE_LOG_QUOTA_BYTES: String(LOG_BYTES + MiB) };
/** BENCH_WORKER_PARTS=overhead,cancel,logs (default all): the parts to run (e.g. one at a time under a profiler). */
const PARTS = (process.env.BENCH_WORKER_PARTS ?? 'overhead,cancel,logs').split(',');
/**
 * The worker the targets are about is `runplane worker`, a process of its own (what a deployment runs);
 * BENCH_WORKER_PROCESS=0 measures every part with the embedded worker (in the server's process) instead. The
 * overhead part also reports the other kind, after the targets' rounds.
 */
const AS_PROCESS = process.env.BENCH_WORKER_PROCESS !== '0';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ended = (r: { status: string }) => (FINISHED_RUN_STATUSES as readonly string[]).includes(r.status);

interface SubmissionView {
  id: string;
  status: string;
  termination_reason: string | null;
  started_at: string | null;
  finished_at: string | null;
}
interface RunView {
  id: string;
  status: string;
  jobs: { id: string; job_submissions: SubmissionView[] }[];
}

/**
 * The worker, end to end, on real PostgreSQL with the real app in-process and a `runplane worker` process (or the
 * embedded worker, see AS_PROCESS) with its default settings (heartbeat and poll every 1 s, `memory-enforcement
 * auto`), side by side with what the same machine does without runplane:
 * - overhead: N jobs of `true` (submit → all done) against spawning `bash -c true` N times at the same concurrency;
 * - cancel latency: a stop request → the job's process group gets SIGTERM (the job traps it and writes the time);
 * - log throughput: a job writing 64 MiB as fast as it can, MiB/s stored; the delay from a line printed to an SSE
 *   follower receiving it.
 */
export async function runWorker(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject(`bench-worker-${process.pid}`);
  const service = await env.app.get(UsersService).createUser(`bench-worker-svc-${process.pid}`, 'service');
  const workDir = mkdtempSync(join(tmpdir(), 'runplane-bench-worker-'));
  const warnings: string[] = [];
  let stopWorker = await startWorker(AS_PROCESS, env.baseUrl, service.token, workDir, warnings);
  const runs = `/api/v1/projects/${project}/runs`;
  const submit = async (jobs: unknown[]) => (await env.http<RunView>('POST', runs, { jobs }, 201)).body;
  const view = async (id: string) => (await env.http<RunView>('GET', `${runs}/${id}?job_submissions_limit=1`)).body;
  /** Polls a run (every `everyMs`) until `done(view)`; its last view. */
  const until = async (id: string, done: (r: RunView) => boolean, everyMs = 50, timeoutMs = 600_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = (await env.http<RunView>('GET', `${runs}/${id}?jobs_limit=0`)).body;
      if (done(r)) return r;
      if (Date.now() > deadline) throw new Error(`run ${id}: still ${r.status} after ${timeoutMs} ms`);
      await sleep(everyMs);
    }
  };
  const results: TargetResult[] = [];
  try {
    log(
      `worker: ${AS_PROCESS ? 'a runplane worker process' : 'the embedded worker (in-process)'}, capacity ` +
        `${CONCURRENCY} jobs of cpu 1; ${fmtInt(OVERHEAD_JOBS)} jobs × ${OVERHEAD_ROUNDS} rounds, ` +
        `${CANCEL_SAMPLES} cancellations, ${LOG_BYTES / MiB} MiB of output, ${FOLLOW_LINES} followed lines`,
    );
    if (PARTS.includes('overhead')) results.push(...(await overhead(submit, until, AS_PROCESS, true)));
    if (PARTS.includes('cancel')) results.push(...(await cancelLatency(env, runs, submit, view, until, workDir)));
    if (PARTS.includes('logs')) results.push(...(await logThroughput(env, runs, submit, view, until)));
    if (PARTS.includes('overhead')) {
      // The other kind of worker, reported: the embedded one shares the server's event loop, and Node's spawn (a
      // fork of the whole server process, on its main thread) costs more there.
      await stopWorker();
      stopWorker = await startWorker(!AS_PROCESS, env.baseUrl, service.token, workDir, warnings);
      results.push(...(await overhead(submit, until, !AS_PROCESS, false)));
    }
    const mismatches = await env.invariantMismatches();
    results.push({
      suite: 'worker',
      target: 'invariant mismatches after = 0',
      measured: String(mismatches.length),
      pass: mismatches.length === 0,
      note: mismatchText(mismatches),
    });
    if (warnings.length > 0) log(`worker warnings (${warnings.length}), first: ${warnings.slice(0, 3).join(' | ')}`);
    return results;
  } finally {
    await stopWorker();
    rmSync(workDir, { recursive: true, force: true });
  }
}

type Submit = (jobs: unknown[]) => Promise<RunView>;
type Until = (id: string, done: (r: RunView) => boolean, everyMs?: number, timeoutMs?: number) => Promise<RunView>;

const spec = (commands: string[], over: Record<string, unknown> = {}) => ({
  commands,
  resources: { cpu: 1, memory_mib: 256 },
  ...over,
});

/** The embedded worker's settings with a capacity of CONCURRENCY jobs; in this process, or as its own process. */
async function startWorker(asProcess: boolean, url: string, token: string, workDir: string, warnings: string[]) {
  const capacity = { cpu: CONCURRENCY, memory_mib: CONCURRENCY * 256, gpu: 0 };
  if (asProcess) {
    const child = spawn(
      process.execPath,
      [
        join(__dirname, '../src/cli.js'),
        'worker',
        '--url',
        url,
        '--capacity',
        `cpu=${capacity.cpu},memory_mib=${capacity.memory_mib},gpu=0`,
        '--work-dir',
        workDir,
        '--worker-id',
        'bench-worker',
      ],
      {
        env: { PATH: process.env.PATH, RUNPLANE_TOKEN: token, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    child.stderr?.on('data', (d: Buffer) => warnings.push(d.toString().trim()));
    return () => stopChild(child);
  }
  const quiet: WorkerLog = {
    info: () => undefined,
    warn: (f, m) => warnings.push(`${m} ${JSON.stringify(f)}`),
    error: (f, m) => warnings.push(`${m} ${JSON.stringify(f)}`),
  };
  const worker = new Worker(
    {
      url,
      token,
      workerId: 'bench-worker',
      capacity,
      workDir,
      heartbeatIntervalS: 1,
      pollIntervalS: 1,
      stopGraceS: 10,
      memoryEnforcement: 'auto',
    },
    quiet,
  );
  await worker.start();
  return () => worker.stop();
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}

/** Runs `n` tasks, at most `concurrency` at once. */
async function pool(n: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await task(next++);
    }),
  );
}

function bashTrue(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', 'true'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`bash -c true exited ${code}`))));
  });
}

async function overhead(submit: Submit, until: Until, asProcess: boolean, isTarget: boolean): Promise<TargetResult[]> {
  const kind = asProcess ? 'a `runplane worker` process' : 'the embedded worker';
  const throughRunplane = async (n: number) => {
    const t0 = performance.now();
    const run = await submit([{ spec: spec(['true']), replicas: n }]);
    const end = await until(run.id, ended);
    if (end.status !== 'done') throw new Error(`overhead run ${run.id} ended ${end.status}`);
    return performance.now() - t0;
  };
  const spawning = async (n: number) => {
    const t0 = performance.now();
    await pool(n, CONCURRENCY, bashTrue);
    return performance.now() - t0;
  };
  // Warm-up: connections, prepared statements, the page cache.
  await throughRunplane(Math.min(50, OVERHEAD_JOBS));
  await spawning(Math.min(50, OVERHEAD_JOBS));
  // Paired rounds, each pair back to back (which goes first alternates): on a machine shared with other work, the
  // load changes between rounds more than within a pair, so the figure is the median of the pairs' ratios.
  const rp: number[] = [];
  const base: number[] = [];
  for (let round = 0; round < OVERHEAD_ROUNDS; round++) {
    if (round % 2 === 0) {
      base.push(await spawning(OVERHEAD_JOBS));
      rp.push(await throughRunplane(OVERHEAD_JOBS));
    } else {
      rp.push(await throughRunplane(OVERHEAD_JOBS));
      base.push(await spawning(OVERHEAD_JOBS));
    }
  }
  const ratios = rp.map((ms, i) => ms / base[i]);
  const ratio = median(ratios);
  const secs = (list: number[]) => list.map((ms) => (ms / 1000).toFixed(2)).join(', ');
  const perSecond = (list: number[]) => (OVERHEAD_JOBS / (median(list) / 1000)).toFixed(0);
  printTable(
    `worker overhead (${kind}): ${fmtInt(OVERHEAD_JOBS)} jobs of \`true\`, ${CONCURRENCY} at a time`,
    ['contender', 'seconds (each round)', 'median s', 'jobs/s'],
    [
      ['runplane: submit → all done', secs(rp), (median(rp) / 1000).toFixed(2), perSecond(rp)],
      ['spawn `bash -c true` from Node', secs(base), (median(base) / 1000).toFixed(2), perSecond(base)],
    ],
    [`ratio per round ${ratios.map(fmtRatio).join(', ')}; median ${fmtRatio(ratio)}`],
  );
  // Every round must hold, not only the median: the worst paired round is the figure.
  const worst = Math.max(...ratios);
  const rounds = `${ratios.length} paired rounds (${ratios.map(fmtRatio).join(', ')}), ${CONCURRENCY} at a time`;
  return [
    isTarget
      ? {
          suite: 'worker',
          target: `overhead, ${kind}: ${fmtInt(OVERHEAD_JOBS)} × \`true\` ≤ 3× bare spawns in every round`,
          measured: `${fmtRatio(worst)} (median ${fmtRatio(ratio)})`,
          pass: worst <= 3,
          note: rounds,
        }
      : {
          suite: 'worker',
          target: `overhead, ${kind} (reported)`,
          measured: `${fmtRatio(worst)} (median ${fmtRatio(ratio)})`,
          pass: true,
          note: rounds,
        },
  ];
}

async function cancelLatency(
  env: BenchEnv,
  runs: string,
  submit: Submit,
  view: (id: string) => Promise<RunView>,
  until: Until,
  workDir: string,
): Promise<TargetResult[]> {
  const dir = join(workDir, 'cancel-stamps');
  mkdirSync(dir, { recursive: true });
  const samples: number[] = [];
  const trap = `trap 'printf "%s" "$EPOCHREALTIME" > "$STAMP"; exit 0' TERM`;
  for (let done = 0; done < CANCEL_SAMPLES;) {
    const n = Math.min(CONCURRENCY, CANCEL_SAMPLES - done);
    const batch = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const stamp = join(dir, `${done + i}`);
        const run = await submit([{ spec: spec([trap, 'sleep 600 & wait'], { env: { STAMP: stamp } }) }]);
        return { run, stamp };
      }),
    );
    await Promise.all(
      batch.map(async ({ run, stamp }) => {
        await until(run.id, (r) => r.status === 'running', 50, 60_000);
        // The job's shell has set its trap once its `running` is reported? Not necessarily: wait for its sleep.
        await sleep(300);
        // At a random point of the heartbeat cycle.
        await sleep(Math.random() * 1000);
        const t0 = Date.now();
        await env.http('POST', `${runs}/${run.id}/stop`, {});
        const deadline = Date.now() + 30_000;
        while (!existsSync(stamp) || readFileSync(stamp, 'utf8').length === 0) {
          if (Date.now() > deadline) throw new Error(`cancel: no SIGTERM reached the job of run ${run.id}`);
          await sleep(10);
        }
        const at = Number(readFileSync(stamp, 'utf8').replace(',', '.')) * 1000;
        samples.push(at - t0);
        const end = await until(run.id, ended, 50, 60_000);
        const s = (await view(run.id)).jobs[0].job_submissions[0];
        if (end.status !== 'terminated' || s.termination_reason !== 'stopped_by_user')
          throw new Error(`cancel: run ${run.id} ended ${end.status}/${s.termination_reason}`);
      }),
    );
    done += n;
  }
  const p50 = percentile(samples, 50);
  const p99 = percentile(samples, 99);
  printTable(
    `worker cancel latency: POST …/stop → SIGTERM in the job (${samples.length} samples, ${CONCURRENCY} at a time)`,
    ['p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'min ms'],
    [
      [
        p50.toFixed(0),
        percentile(samples, 95).toFixed(0),
        p99.toFixed(0),
        Math.max(...samples).toFixed(0),
        Math.min(...samples).toFixed(0),
      ],
    ],
  );
  return [
    {
      suite: 'worker',
      target: 'cancel latency p50 ≤ 1 s',
      measured: `${p50.toFixed(0)} ms`,
      pass: p50 <= 1000,
      note: `${samples.length} samples`,
    },
    {
      suite: 'worker',
      target: 'cancel latency p99 ≤ 2 s',
      measured: `${p99.toFixed(0)} ms`,
      pass: p99 <= 2000,
      note: `max ${Math.max(...samples).toFixed(0)} ms`,
    },
  ];
}

async function logThroughput(
  env: BenchEnv,
  runs: string,
  submit: Submit,
  view: (id: string) => Promise<RunView>,
  until: Until,
): Promise<TargetResult[]> {
  // What PostgreSQL alone stores on this machine now: the same amount in 1 MiB bytea rows, a transaction each.
  const pgBefore = await plainInserts(env);
  // Text that does not compress to nothing (base64 of random bytes), written as fast as the pipe takes it.
  const writer = await submit([
    { spec: spec([`head -c ${LOG_BYTES} /dev/urandom | base64 -w 100 | head -c ${LOG_BYTES}`]) },
  ]);
  const t0 = performance.now();
  const end = await until(writer.id, ended, 20, 600_000);
  const wall = (performance.now() - t0) / 1000;
  const s = (await view(writer.id)).jobs[0].job_submissions[0];
  if (end.status !== 'done') throw new Error(`log writer ended ${end.status}/${s.termination_reason}`);
  const [stored] = (
    await env.pool.query<{ bytes: string; chunks: string }>(
      `SELECT stdout_bytes + stderr_bytes AS bytes, n_chunks AS chunks FROM submission_logs WHERE submission_id = $1`,
      [s.id],
    )
  ).rows;
  if (Number(stored?.bytes) !== LOG_BYTES)
    throw new Error(`log writer: ${stored?.bytes} bytes stored, not ${LOG_BYTES}`);
  const seconds = (Date.parse(s.finished_at ?? '') - Date.parse(s.started_at ?? '')) / 1000;
  const mibps = LOG_BYTES / MiB / seconds;
  const pgAfter = await plainInserts(env);
  const pgMibps = (pgBefore + pgAfter) / 2;

  // Follow delay: a line with the time it was printed, every 100 ms, to an SSE follower.
  const ticker = await submit([
    { spec: spec([`for i in $(seq 1 ${FOLLOW_LINES}); do echo "tick $i $EPOCHREALTIME"; sleep 0.1; done`]) },
  ]);
  const delays: number[] = [];
  const follow = followLog(env, `${runs}/${ticker.id}/jobs/${ticker.jobs[0].id}/logs`, (data) => {
    const now = Date.now();
    for (const m of data.matchAll(/^tick \d+ (\d+[.,]\d+)$/gm))
      delays.push(now - Number(m[1].replace(',', '.')) * 1000);
  });
  await follow;
  await until(ticker.id, (r) => r.status === 'done', 50, 60_000);
  if (delays.length !== FOLLOW_LINES) throw new Error(`follow: ${delays.length} of ${FOLLOW_LINES} lines received`);
  const p50 = percentile(delays, 50);
  printTable(
    'worker logs: throughput stored, and follow delay',
    ['measure', 'figure', 'detail'],
    [
      [
        'stored MiB/s (running → done)',
        mibps.toFixed(1),
        `${LOG_BYTES / MiB} MiB in ${seconds.toFixed(2)} s, ${stored.chunks} chunks; ` +
          `submit → done seen ${wall.toFixed(2)} s`,
      ],
      [
        'plain INSERTs from Node (pg), 1 MiB rows',
        pgMibps.toFixed(1),
        `before ${pgBefore.toFixed(1)}, after ${pgAfter.toFixed(1)} MiB/s: runplane stores ` +
          `${fmtRatio(mibps / pgMibps)} of it`,
      ],
      [
        'follow delay p50 ms',
        p50.toFixed(0),
        `p95 ${percentile(delays, 95).toFixed(0)} ms, max ${Math.max(...delays).toFixed(0)} ms ` +
          `over ${delays.length} lines`,
      ],
    ],
  );
  return [
    {
      suite: 'worker',
      target: `log throughput (${LOG_BYTES / MiB} MiB job) ≥ 20 MiB/s stored`,
      measured: `${mibps.toFixed(1)} MiB/s`,
      pass: mibps >= 20,
      note: `${stored.chunks} chunks; plain INSERTs ${pgMibps.toFixed(1)} MiB/s (${fmtRatio(mibps / pgMibps)})`,
    },
    {
      suite: 'worker',
      target: 'follow delay (printed → SSE) p50 ≤ 500 ms',
      measured: `${p50.toFixed(0)} ms`,
      pass: p50 <= 500,
      note: `p95 ${percentile(delays, 95).toFixed(0)} ms`,
    },
  ];
}

/** MiB/s of LOG_BYTES inserted as 1 MiB bytea rows, one transaction each, into a scratch table. */
async function plainInserts(env: BenchEnv): Promise<number> {
  const chunk = Buffer.from(randomBytes((3 * MiB) / 4).toString('base64'));
  const client = await env.pool.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS bench_plain_log (n int, data bytea)');
    await client.query('TRUNCATE bench_plain_log');
    const t0 = performance.now();
    for (let n = 0; n < LOG_BYTES / MiB; n++) {
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_plain_log (n, data) VALUES ($1, $2)', [n, chunk]);
      await client.query('COMMIT');
    }
    const mibps = LOG_BYTES / MiB / ((performance.now() - t0) / 1000);
    await client.query('DROP TABLE bench_plain_log');
    return mibps;
  } finally {
    client.release();
  }
}

/** Follows a job's log as Server-Sent Events until `event: end`; each chunk's text to `onData` as it arrives. */
function followLog(env: BenchEnv, path: string, onData: (text: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(env.baseUrl + path, { headers: { ...env.auth, Accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`follow ${path}: ${res.statusCode}`));
      res.setEncoding('utf8');
      let buffer = '';
      res.on('data', (text: string) => {
        buffer += text;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event === 'chunk' && data) onData((JSON.parse(data) as { data: string }).data);
        }
      });
      res.on('end', resolve);
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
