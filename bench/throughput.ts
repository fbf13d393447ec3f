import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Client } from 'pg';
import {
  claimAndStartAll,
  Claimed,
  DONE,
  ERROR,
  httpPost,
  type Outcome,
  type Post,
  ReferenceWorker,
} from './reference-worker';
import { postgresCpuSeconds, ServerUnderTest } from './server-under-test';
import { fmtInt, fmtRatio, log, median, printTable, QUICK, TargetResult } from './support';

/**
 * `npm run bench -- throughput` (issue #19): the worker cycle as a fleet runs it, against servers in processes of
 * their own (the bench's clients never share a server's event loop), side by side in one sitting:
 * - this build, and with BENCH_BASELINE_DIR a built checkout of the commit before the throughput work;
 * - the whole cycle (claim 10 → running → complete) with 8 workers, idle claims counted;
 * - `complete` alone with 8 workers, one call per report, and in batches of 25;
 * - 8 workers in one run against 16 workers in 16 runs (the hot row).
 * Every part alternates its contenders over fresh runs, ROUNDS each after an untimed warm-up, and takes medians;
 * each part starts with what autovacuum would have done by then (ServerUnderTest.vacuum); invariants are checked at
 * the end on every server, and the server's resident memory is sampled throughout.
 */

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 3));
const JOBS_PER_LEVEL = QUICK ? 50 : 400; // × 6 levels (root + depth 1..5): 2,400 jobs a run
const WARM_UP_JOBS_PER_LEVEL = QUICK ? 10 : 100;
const WORKERS = 8;
const CLAIM = 10;
const BATCH = 25;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const outcomeOf = (k: number): Outcome => (k % 10 === 9 ? ERROR : DONE);
/** BENCH_THROUGHPUT_PARTS=cycle,complete,batched,hot picks parts (default: all). */
const PARTS = new Set((process.env.BENCH_THROUGHPUT_PARTS ?? 'cycle,complete,batched,hot').split(','));

interface Contender {
  label: string;
  server: ServerUnderTest;
  project: string;
  post: Post;
  /** Whether it has POST /internal/v1/submissions/reports (the runplane worker sends due reports together). */
  batches: boolean;
}

/** Where the time went during a timed phase: CPU of the server and PostgreSQL, and what backends waited on. */
interface PhaseCost {
  serverCpuMs: number;
  postgresCpuMs: number;
  waits: Map<string, number>;
  samples: number;
}

/** Samples pg_stat_activity of the server's database every 25 ms while `fn` runs (about 1 % of a core). */
async function observed<T>(c: Contender, fn: () => Promise<T>): Promise<{ value: T; cost: PhaseCost }> {
  const client = new Client({ connectionString: c.server.databaseUrl });
  await client.connect();
  const waits = new Map<string, number>();
  let samples = 0;
  let done = false;
  const sampler = (async () => {
    while (!done) {
      const { rows } = await client.query<{ state: string | null; type: string | null; event: string | null }>({
        name: 'sample',
        text: `SELECT state, wait_event_type AS type, wait_event AS event FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid()
                  AND application_name <> 'runplane-bench'`,
      });
      for (const r of rows) {
        const what = r.state === 'active' ? (r.type ? `${r.type}:${r.event}` : 'CPU') : (r.state ?? '?');
        waits.set(what, (waits.get(what) ?? 0) + 1);
      }
      samples++;
      await sleep(25);
    }
  })();
  const cpu0 = c.server.cpuSeconds();
  const pg0 = postgresCpuSeconds();
  try {
    const value = await fn();
    return {
      value,
      cost: {
        serverCpuMs: (c.server.cpuSeconds() - cpu0) * 1000,
        postgresCpuMs: (postgresCpuSeconds() - pg0) * 1000,
        waits,
        samples,
      },
    };
  } finally {
    done = true;
    await sampler;
    await client.end();
  }
}

/** A run of `jobsPerLevel` × 6 jobs over a depth-5 chain of groups (every completion counts into 1–6 levels). */
async function chainRun(c: Contender, jobsPerLevel: number): Promise<string> {
  const spec = { commands: ['true'], resources: { cpu: 1, memory_mib: 512 } };
  const runs = `/api/v1/projects/${c.project}/runs`;
  const run = await c.server.http<{ id: string }>('POST', runs, { jobs: [{ spec, replicas: jobsPerLevel }] }, 201);
  let parent = 0;
  for (let depth = 1; depth <= 5; depth++) {
    const g = await c.server.http<{ job_group_id: number }>(
      'POST',
      `${runs}/${run.body.id}/job-groups`,
      { parent_id: parent },
      201,
    );
    parent = g.body.job_group_id;
    await c.server.http('POST', `${runs}/${run.body.id}/job-groups/${parent}/jobs`, {
      jobs: [{ spec, replicas: jobsPerLevel }],
    });
  }
  return run.body.id;
}

/** Sends reports through the batch route in slices of `batch`; throws on a refused batch or report. */
async function sendBatch(
  post: Post,
  workerId: string,
  reports: Record<string, unknown>[],
  batch = BATCH,
): Promise<void> {
  for (let k = 0; k < reports.length; k += batch) {
    const res = await post('/internal/v1/submissions/reports', {
      worker_id: workerId,
      reports: reports.slice(k, k + batch),
    });
    if (res.status !== 200) throw new Error(`reports: ${res.status} ${JSON.stringify(res.body)}`);
    for (const r of res.body.results as { status_code: number; body: unknown }[])
      if (r.status_code !== 200) throw new Error(`a report: ${r.status_code} ${JSON.stringify(r)}`);
  }
}

async function expectOk(what: string, p: Promise<{ status: number; body: unknown }>): Promise<void> {
  const res = await p;
  if (res.status !== 200) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

/**
 * The whole cycle as a fleet runs it: each worker claims up to 10, reports them running, reports them complete,
 * and claims again, until every job of the run was handed out. A build with the batch route sends each turn's
 * reports together, as the runplane worker does; an older one, one call each. An idle claim is an empty answer while
 * jobs were queued: one that some claim begun after it had ended still found work (the bench's own count of what is
 * left lags behind answers in flight, so it alone would count a claim that lost the last jobs to a concurrent one).
 */
async function wholeCycle(c: Contender, total: number): Promise<{ jobsPerSecond: number; idleClaims: number }> {
  let unclaimed = total;
  const claims: { start: number; end: number; got: number }[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WORKERS }, async (_, i) => {
      const w = new ReferenceWorker(c.post, `cycle-${c.label}-${i}`);
      for (let k = 0; ;) {
        const start = performance.now();
        const got = await w.claim(CLAIM);
        claims.push({ start, end: performance.now(), got: got.length });
        if (got.length === 0) {
          if (unclaimed <= 0) return;
          await sleep(1);
          continue;
        }
        unclaimed -= got.length;
        if (c.batches) {
          await sendBatch(
            c.post,
            w.workerId,
            got.map((s) => ({ submission_id: s.id, kind: 'running', provisioning_data: { instance: w.workerId } })),
          );
          await sendBatch(
            c.post,
            w.workerId,
            got.map((s) => ({ submission_id: s.id, kind: 'complete', ...outcomeOf(k++) })),
          );
        } else {
          for (const s of got) await expectOk('running', w.running(s.id));
          for (const s of got) await expectOk('complete', w.complete(s.id, outcomeOf(k++)));
        }
      }
    }),
  );
  const lastFruitfulStart = Math.max(...claims.filter((x) => x.got > 0).map((x) => x.start));
  const idleClaims = claims.filter((x) => x.got === 0 && x.end < lastFruitfulStart).length;
  return { jobsPerSecond: total / ((performance.now() - started) / 1000), idleClaims };
}

/**
 * Every one of the `queued` submissions claimed and reported running by `workers` (untimed set-up), each worker
 * holding an equal share, with one `running` call a report on every server alike: measured side by side, completions
 * after batched `running` reports ran ~10 % slower than after single ones, the same build against itself (12
 * alternated rounds each way), so a set-up that differed between contenders would tilt the timed phase.
 */
async function holdAll(c: Contender, workers: ReferenceWorker[], queued: number): Promise<Claimed[][]> {
  const held = await claimAndStartAll(workers, { claim: 100, each: Math.ceil(queued / workers.length) });
  const n = held.reduce((sum, h) => sum + h.length, 0);
  if (n !== queued) throw new Error(`${c.label}: the workers hold ${n} submissions, not the ${queued} queued`);
  return held;
}

/** `complete` for everything held, all workers at once: one call per report, or batches of BATCH. */
async function completeHeld(c: Contender, workers: ReferenceWorker[], held: Claimed[][], batched: boolean) {
  let n = 0;
  const started = performance.now();
  await Promise.all(
    workers.map(async (w, i) => {
      const mine = held[i];
      if (batched) {
        await sendBatch(
          c.post,
          w.workerId,
          mine.map((s, k) => ({ submission_id: s.id, kind: 'complete', ...outcomeOf(k) })),
        );
        n += mine.length;
        return;
      }
      for (const [k, s] of mine.entries()) {
        await expectOk('complete', w.complete(s.id, outcomeOf(k)));
        n++;
      }
    }),
  );
  return n / ((performance.now() - started) / 1000);
}

/**
 * The hot row: 8 workers completing jobs of one run against 16 workers each completing jobs of a run of its own
 * (each holding only its own run's submissions), the same number of jobs in all; single-report `complete`. Also 8
 * workers over 8 runs: the same concurrency as the one run, so that the one run's gap to it is the hot row alone
 * (reports of concurrent requests share transactions, so 16 workers gain from concurrency too).
 */
async function hotAndSpread(c: Contender): Promise<{ oneRun: number; spread: number; spreadEight: number }> {
  // One run: 8 workers share it.
  await chainRun(c, JOBS_PER_LEVEL);
  const eight = Array.from({ length: WORKERS }, (_, i) => new ReferenceWorker(c.post, `hot-${c.label}-${i}`));
  const oneRun = await completeHeld(c, eight, await holdAll(c, eight, JOBS_PER_LEVEL * 6), false);
  const spread = await spreadOver(c, 16);
  const spreadEight = await spreadOver(c, WORKERS);
  return { oneRun, spread, spreadEight };
}

/** `n` runs, one worker each, as many jobs in all as one bench run: a worker claims right after its run exists. */
async function spreadOver(c: Contender, n: number): Promise<number> {
  const per = Math.max(1, Math.floor(JOBS_PER_LEVEL / n));
  const workers = Array.from({ length: n }, (_, i) => new ReferenceWorker(c.post, `spread${n}-${c.label}-${i}`));
  const held: Claimed[][] = [];
  for (const w of workers) {
    await chainRun(c, per);
    held.push(...(await holdAll(c, [w], per * 6)));
  }
  return completeHeld(c, workers, held, false);
}

function waitsText(cost: PhaseCost): string {
  const total = [...cost.waits.values()].reduce((a, b) => a + b, 0) || 1;
  return [...cost.waits.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([k, n]) => `${k} ${((100 * n) / total).toFixed(0)}%`)
    .join(', ');
}

async function contender(label: string, cli: string, batches: boolean): Promise<Contender> {
  const server = await ServerUnderTest.start(label, cli);
  const project = await server.createProject(`throughput-${label}`);
  const token = await server.serviceToken(`throughput-workers-${label}`);
  return { label, server, project, post: httpPost(server.baseUrl, token), batches };
}

export async function runThroughput(): Promise<TargetResult[]> {
  const results: TargetResult[] = [];
  const current = await contender('this-build', join(__dirname, '../src/cli.js'), true);
  const baseDir = process.env.BENCH_BASELINE_DIR;
  const baseline = baseDir ? await contender('baseline', join(baseDir, 'dist/src/cli.js'), false) : undefined;
  const contenders = baseline ? [current, baseline] : [current];
  try {
    log(
      `throughput: ${fmtInt(JOBS_PER_LEVEL * 6)} jobs a run over a depth-5 chain, ${WORKERS} workers, ${ROUNDS} ` +
        `rounds, alternated; servers: ${contenders.map((c) => `${c.label} (pid ${c.server.pid})`).join(', ')}`,
    );
    const total = JOBS_PER_LEVEL * 6;
    // Untimed: a small cycle on each server first, so no contender's first round pays for its code's warm-up (V8
    // compiling the hot path, PostgreSQL's caches and prepared statements).
    for (const c of contenders) {
      await chainRun(c, WARM_UP_JOBS_PER_LEVEL);
      await wholeCycle(c, WARM_UP_JOBS_PER_LEVEL * 6);
    }
    const figures = new Map<string, number[]>();
    const costs = new Map<string, PhaseCost[]>();
    const idle = new Map<string, number>();
    const push = (k: string, v: number, cost?: PhaseCost) => {
      figures.set(k, [...(figures.get(k) ?? []), v]);
      if (cost) costs.set(k, [...(costs.get(k) ?? []), cost]);
    };
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? contenders : [...contenders].reverse();
      for (const c of order) {
        if (PARTS.has('cycle')) {
          await c.server.vacuum();
          await chainRun(c, JOBS_PER_LEVEL);
          const cycle = await observed(c, () => wholeCycle(c, total));
          push(`cycle ${c.label}`, cycle.value.jobsPerSecond, cycle.cost);
          idle.set(c.label, (idle.get(c.label) ?? 0) + cycle.value.idleClaims);
        }
        if (!PARTS.has('complete')) continue;

        await c.server.vacuum();
        await chainRun(c, JOBS_PER_LEVEL);
        const workers = Array.from(
          { length: WORKERS },
          (_, i) => new ReferenceWorker(c.post, `single-${c.label}-${i}`),
        );
        const held = await holdAll(c, workers, total);
        const single = await observed(c, () => completeHeld(c, workers, held, false));
        push(`complete ${c.label}`, single.value, single.cost);
      }
      if (current.batches && PARTS.has('batched')) {
        for (const batched of round % 2 === 0 ? [true, false] : [false, true]) {
          await current.server.vacuum();
          await chainRun(current, JOBS_PER_LEVEL);
          const workers = Array.from({ length: WORKERS }, (_, i) => new ReferenceWorker(current.post, `b-${i}`));
          const held = await holdAll(current, workers, total);
          const got = await observed(current, () => completeHeld(current, workers, held, batched));
          push(batched ? 'batched' : 'unbatched', got.value, got.cost);
        }
      }
      if (PARTS.has('hot')) {
        await current.server.vacuum();
        const hot = await observed(current, () => hotAndSpread(current));
        push('one run', hot.value.oneRun);
        push('spread', hot.value.spread);
        push('spread 8', hot.value.spreadEight);
      }
    }
    const med = (k: string) => median(figures.get(k) ?? []);
    const slowest = (k: string) => Math.min(...(figures.get(k) ?? [NaN]));
    /** "a vs b/s = ratio" for two measures' medians. */
    const versus = (a: string, b: string, unit = '/s') =>
      `${med(a).toFixed(0)} vs ${med(b).toFixed(0)}${unit} = ${fmtRatio(med(a) / med(b))}`;
    const memory = contenders.map((c) => `${c.label} ${c.server.peakRssMiB().toFixed(0)} MiB`).join(', ');
    const row = (name: string, k: string, vs?: string) => {
      const cs = costs.get(k) ?? [];
      const cpu = cs.length ? median(cs.map((x) => x.serverCpuMs)) : NaN;
      const pg = cs.length ? median(cs.map((x) => x.postgresCpuMs)) : NaN;
      return [
        name,
        (figures.get(k) ?? []).map((x) => x.toFixed(0)).join(', '),
        med(k).toFixed(0),
        vs ? fmtRatio(med(k) / med(vs)) : '',
        Number.isNaN(cpu) ? '' : `${(cpu / 1000).toFixed(1)} s / ${(pg / 1000).toFixed(1)} s`,
        cs.length ? waitsText(cs[cs.length - 1]) : '',
      ];
    };
    const rows = [
      row('whole cycle, this build (jobs/s)', 'cycle this-build', baseline ? 'cycle baseline' : undefined),
      ...(baseline ? [row('whole cycle, baseline (jobs/s)', 'cycle baseline')] : []),
      row('complete, single, this build (/s)', 'complete this-build', baseline ? 'complete baseline' : undefined),
      ...(baseline ? [row('complete, single, baseline (/s)', 'complete baseline')] : []),
      row(`complete, batches of ${BATCH} (/s)`, 'batched', 'unbatched'),
      row('complete, single, same sitting (/s)', 'unbatched'),
      row('8 workers, one run (/s)', 'one run', 'spread'),
      row('16 workers, 16 runs (/s)', 'spread'),
      row('8 workers, 8 runs (/s)', 'spread 8'),
    ];
    printTable(
      'throughput: the worker cycle against servers in their own processes (each round alternated; medians)',
      ['measure', 'each round', 'median', 'ratio', 'CPU server / PostgreSQL', 'backends (last round)'],
      rows,
      [
        `idle claims (empty answers while jobs were queued): ${[...idle].map(([k, n]) => `${k} ${n}`).join(', ')}`,
        `peak resident memory: ${memory}`,
        `8 workers in one run against 8 in 8 runs (the same concurrency: the hot row alone): ` +
          fmtRatio(med('one run') / med('spread 8')),
      ],
    );
    const mismatches = await current.server.invariantMismatches();
    if (baseline) {
      const r = med('cycle this-build') / med('cycle baseline');
      results.push({
        suite: 'throughput',
        target: 'whole cycle, 8 workers: ≥ 3× the commit before the throughput work',
        measured: versus('cycle this-build', 'cycle baseline', ' jobs/s'),
        pass: r >= 3,
      });
      const s = med('complete this-build') / med('complete baseline');
      results.push({
        suite: 'throughput',
        target: 'complete, single reports, 8 workers: ≥ 2× the commit before the throughput work',
        measured: versus('complete this-build', 'complete baseline'),
        pass: s >= 2,
      });
    }
    results.push(
      {
        // A bound, not a ratio: the machine's speed moves it as much as the build does, so it must hold in every
        // round (a slow spell included), not only at the median.
        suite: 'throughput',
        target: 'complete, single reports, 8 workers: ≥ 1,000/s in every round',
        measured:
          `median ${med('complete this-build').toFixed(0)}/s, ` +
          `slowest round ${slowest('complete this-build').toFixed(0)}/s`,
        pass: slowest('complete this-build') >= 1000,
      },
      {
        suite: 'throughput',
        target: `complete in batches of ${BATCH}: ≥ 4× single reports (same sitting)`,
        measured: versus('batched', 'unbatched'),
        pass: med('batched') >= 4 * med('unbatched'),
      },
      {
        suite: 'throughput',
        target: '8 workers in one run ≥ 0.8× 16 workers in 16 runs',
        measured: fmtRatio(med('one run') / med('spread')),
        pass: med('one run') >= 0.8 * med('spread'),
      },
      {
        suite: 'throughput',
        target: 'idle claims while jobs were queued = 0 (this build)',
        measured: String(idle.get(current.label) ?? 0),
        pass: (idle.get(current.label) ?? 0) === 0,
      },
      {
        suite: 'throughput',
        target: 'invariant mismatches after = 0',
        measured: String(mismatches.length),
        pass: mismatches.length === 0,
        note: mismatches.slice(0, 2).join('; '),
      },
    );
    return results;
  } catch (err) {
    for (const c of contenders) log(`${c.label} output:\n${c.server.lastOutput()}`);
    throw err;
  } finally {
    for (const c of contenders) await c.server.stop();
  }
}
