import { performance } from 'node:perf_hooks';
import { TOKENS } from '../src/modules/billing/billing.repository';
import { UsersService } from '../src/modules/users/users.service';
import { Claimed, claimAndStartAll, DONE, ERROR, httpPost, ReferenceWorker, timedReports } from './reference-worker';
import {
  BenchEnv,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measureSideBySide,
  mismatchText,
  printTable,
  QUICK,
  TargetResult,
  verdict,
} from './support';

/**
 * Billing (targets.md, "Bulk and billing"; issue 5, "Tests and benchmark"):
 * (b) completion throughput with billing on: 8 reference workers, one run over a depth-5 chain (the lifecycle
 *     benchmark's shape), each submission running → heartbeat (accrues) → complete (accrues and closes); only the
 *     `complete` calls are timed, as in bench/lifecycle. Runs first, so its workers never meet the queued jobs of (a).
 * (a) cost read latency, GET .../job-groups/{g}/cost and GET .../runs/{id}/cost, of a group (and run) whose subtree
 *     holds 10 submissions vs one holding 100,000. A handful of submissions of each go through the real worker
 *     lifecycle (some closed, some left running so the open-attempt half of the cost query has rows); the rest of the
 *     big subtree's billing rows (attempts, pinned quantities, usage aggregates split by UTC day and token) are
 *     written by SQL the way BillingRepository writes them, then checked by GET /admin/v1/invariants.
 */

const SUITE = 'billing';
const WORKERS = Number(process.env.BENCH_WORKERS ?? 8);
const JOBS_PER_LEVEL = QUICK ? 100 : 800; // × 6 levels (root + depth 1..5), as bench/lifecycle
const DEPTH = 5;
const BIG_JOBS = QUICK ? 10_000 : 100_000;
const BIG_REQUESTS = 10; // 2 per level of the chain
const SMALL_JOBS = 10; // 2 per level of the chain
const BIG_LIVE = 40; // submissions of the big run driven through the real lifecycle
const LIVE_LEFT_RUNNING = 0.1; // of the live ones, this share stays running (open attempts)
const READ_ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 10 : 30);

const spec = (i = 0) => ({
  commands: [`python shard.py --index ${i}`],
  image: 'python:3.12',
  resources: { cpu: 2, memory_mib: 3000 },
});

interface CostReport {
  total_usd: number;
  running_usd: number;
  breakdown: { resource: string; usage: number; unit: string; cost_usd: number }[];
}

const runsPath = (project: string) => `/api/v1/projects/${project}/runs`;

async function expectOk(what: string, p: Promise<{ status: number; body: unknown }>): Promise<void> {
  const r = await p;
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
}

/**
 * A run (one job at the root) with a chain of DEPTH groups; `total` jobs in `requests` requests spread over the chain.
 */
async function runWithChain(
  env: BenchEnv,
  project: string,
  total: number,
  requests: number,
): Promise<{ runId: string; chain: number[]; addMs: number[] }> {
  const run = await env.http<{ id: string }>('POST', runsPath(project), { jobs: [{ spec: spec() }] }, 201);
  const chain: number[] = [];
  for (let d = 0; d < DEPTH; d++) {
    const g = await env.http<{ job_group_id: number }>(
      'POST',
      `${runsPath(project)}/${run.body.id}/job-groups`,
      { parent_id: chain.length ? chain[chain.length - 1] : 0 },
      201,
    );
    chain.push(g.body.job_group_id);
  }
  const per = total / requests;
  if (!Number.isInteger(per) || requests % DEPTH !== 0) throw new Error('uneven fill');
  const addMs: number[] = [];
  for (let r = 0; r < requests; r++) {
    const g = chain[Math.floor((r * DEPTH) / requests)];
    const t0 = performance.now();
    const res = await env.http<{ jobs: unknown[] }>(
      'POST',
      `${runsPath(project)}/${run.body.id}/job-groups/${g}/jobs`,
      { jobs: [{ spec: spec(r), replicas: per }] },
      201,
    );
    addMs.push(performance.now() - t0);
    if (res.body.jobs.length !== per) throw new Error(`added ${res.body.jobs.length} jobs, expected ${per}`);
  }
  return { runId: run.body.id, chain, addMs };
}

/**
 * Drives up to `n` queued submissions through running → heartbeat, then completes all but `leaveRunning` of them
 * (one in ten failed). Returns how many were claimed.
 */
async function driveLive(
  worker: ReferenceWorker,
  n: number,
  leaveRunning: number,
): Promise<{ claimed: number; open: number }> {
  const got: Claimed[] = [];
  while (got.length < n) {
    const batch = await worker.claim(Math.min(50, n - got.length));
    if (batch.length === 0) break;
    got.push(...batch);
  }
  for (const [k, s] of got.entries()) {
    await expectOk('running', worker.running(s.id));
    await expectOk('heartbeat', worker.heartbeat(s.id));
    if (k < got.length - leaveRunning) await expectOk('complete', worker.complete(s.id, k % 10 === 9 ? ERROR : DONE));
  }
  return { claimed: got.length, open: Math.min(leaveRunning, got.length) };
}

const CURRENT = `SELECT DISTINCT ON (name) id, name FROM resources ORDER BY name, version DESC`;

/**
 * Closed billing rows for every submission of `runId` that has no attempt yet, as BillingRepository would have left
 * them after `running` + one accrual that closed the attempt: the attempt (chain = self and ancestors by level), the
 * quantities pinned at the current rates (each spec key × its requestable_resources factor; zeros omitted), and usage
 * (quantity × seconds, numeric) added to the job, every group of the chain, the run and project × user × UTC day,
 * split at UTC midnight, spread over the app's TOKENS shards. Spans are 1..50 min, started up to 2 days ago (some cross
 * midnight).
 */
async function bulkBill(env: BenchEnv, runId: string): Promise<number> {
  const c = await env.pool.connect();
  try {
    await c.query('BEGIN');
    const att = await c.query(
      `CREATE TEMP TABLE bench_att ON COMMIT DROP AS
       SELECT s.*, s.started_at + make_interval(secs => 60 + (s.rn * 7919) % 2940) AS rolled_up_to
         FROM (
           SELECT js.id AS submission_id, js.run_id, js.job_id, r.project_id, r.user_id,
                  j.spec->'resources' AS resources,
                  (SELECT array_agg(x.ancestor_id ORDER BY x.level) FROM job_group_self_and_ancestors x
                    WHERE x.run_id = js.run_id AND x.job_group_id = js.job_group_id) AS job_group_ids,
                  (row_number() OVER (ORDER BY js.id) % ${TOKENS})::smallint AS token,
                  now() - make_interval(secs => 3600 + (row_number() OVER (ORDER BY js.id) * 104729) % 172800)
                    AS started_at,
                  row_number() OVER (ORDER BY js.id) AS rn
             FROM job_submissions js JOIN runs r ON r.id = js.run_id JOIN jobs j ON j.id = js.job_id
            WHERE js.run_id = $1 AND NOT EXISTS (SELECT 1 FROM billing_attempts a WHERE a.submission_id = js.id)
         ) s`,
      [runId],
    );
    await c.query(
      `INSERT INTO billing_attempts (submission_id, run_id, job_id, project_id, user_id, job_group_ids, started_at,
                                     rolled_up_to, closed_at)
       SELECT submission_id, run_id, job_id, project_id, user_id, job_group_ids, started_at, rolled_up_to, rolled_up_to
         FROM bench_att`,
    );
    await c.query(
      `INSERT INTO submission_resources (submission_id, resource_id, quantity)
       SELECT b.submission_id, r.id, q.quantity
         FROM bench_att b
        CROSS JOIN LATERAL (
          SELECT k.resource_name AS name, req.value::numeric * k.factor AS quantity
            FROM jsonb_each_text(b.resources) req JOIN requestable_resources k ON k.spec_key = req.key
        ) q
         JOIN (${CURRENT}) r ON r.name = q.name
        WHERE q.quantity > 0`,
    );
    // Pieces: the pinned (stored, rounded) quantity × the seconds of each UTC day, as BillingRepository.accrue.
    await c.query(
      `CREATE TEMP TABLE bench_pieces ON COMMIT DROP AS
       SELECT b.submission_id, b.run_id, b.job_id, b.project_id, b.user_id, b.job_group_ids, b.token,
              t.day::date AS day, sr.resource_id,
              sr.quantity * EXTRACT(EPOCH FROM (t.e - t.s)) AS usage
         FROM bench_att b
        CROSS JOIN LATERAL (
          SELECT d.day, GREATEST(b.started_at, d.day AT TIME ZONE 'UTC') AS s,
                 LEAST(b.rolled_up_to, (d.day + interval '1 day') AT TIME ZONE 'UTC') AS e
            FROM generate_series(date_trunc('day', b.started_at AT TIME ZONE 'UTC'),
                                 date_trunc('day', b.rolled_up_to AT TIME ZONE 'UTC'), interval '1 day') d(day)
        ) t
         JOIN submission_resources sr ON sr.submission_id = b.submission_id
        WHERE t.e > t.s`,
    );
    await c.query(
      `INSERT INTO billing_job_usage AS x (job_id, resource_id, run_id, usage)
       SELECT job_id, resource_id, run_id, SUM(usage) FROM bench_pieces GROUP BY job_id, resource_id, run_id
       ON CONFLICT (job_id, resource_id) DO UPDATE SET usage = x.usage + EXCLUDED.usage`,
    );
    await c.query(
      `INSERT INTO billing_group_usage AS x (run_id, job_group_id, resource_id, token, usage)
       SELECT p.run_id, g.id, p.resource_id, p.token, SUM(p.usage)
         FROM bench_pieces p CROSS JOIN LATERAL unnest(p.job_group_ids) g(id)
        GROUP BY p.run_id, g.id, p.resource_id, p.token
       ON CONFLICT (run_id, job_group_id, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage`,
    );
    await c.query(
      `INSERT INTO billing_run_usage AS x (run_id, resource_id, token, usage)
       SELECT run_id, resource_id, token, SUM(usage) FROM bench_pieces GROUP BY run_id, resource_id, token
       ON CONFLICT (run_id, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage`,
    );
    await c.query(
      `INSERT INTO billing_daily_usage AS x (project_id, user_id, day, resource_id, token, usage)
       SELECT project_id, user_id, day, resource_id, token, SUM(usage) FROM bench_pieces
         GROUP BY project_id, user_id, day, resource_id, token
       ON CONFLICT (project_id, user_id, day, resource_id, token) DO UPDATE SET usage = x.usage + EXCLUDED.usage`,
    );
    await c.query('COMMIT');
    return att.rowCount ?? 0;
  } catch (err) {
    await c.query('ROLLBACK');
    throw err;
  } finally {
    c.release();
  }
}

/** (b) Completion throughput with billing on, the lifecycle benchmark's shape plus a heartbeat per submission. */
async function throughput(env: BenchEnv, project: string, token: string): Promise<{ results: TargetResult[] }> {
  const lspec = { commands: ['sleep 1'], resources: { cpu: 1, memory_mib: 512 } };
  const run = await env.http<{ id: string }>(
    'POST',
    runsPath(project),
    { jobs: [{ spec: lspec, replicas: JOBS_PER_LEVEL }] },
    201,
  );
  let parent = 0;
  for (let depth = 1; depth <= DEPTH; depth++) {
    const g = await env.http<{ job_group_id: number }>(
      'POST',
      `${runsPath(project)}/${run.body.id}/job-groups`,
      { parent_id: parent },
      201,
    );
    parent = g.body.job_group_id;
    await env.http(
      'POST',
      `${runsPath(project)}/${run.body.id}/job-groups/${parent}/jobs`,
      { jobs: [{ spec: lspec, replicas: JOBS_PER_LEVEL }] },
      201,
    );
  }
  const total = JOBS_PER_LEVEL * (DEPTH + 1);
  const post = httpPost(env.baseUrl, token);
  const workers = Array.from({ length: WORKERS }, (_, i) => new ReferenceWorker(post, `bench-billing-w${i}`));
  const held = await claimAndStartAll(workers);
  const claimed = held.reduce((n, h) => n + h.length, 0);
  log(
    `   (b) ${fmtInt(total)} jobs in one run over a depth-${DEPTH} chain, ${fmtInt(claimed)} claimed and running ` +
      `on ${WORKERS} workers`,
  );

  // Heartbeats (each accrues into job, 1-6 group rows, run and day rows), timed separately, informational.
  const { seconds: hbSeconds, statuses: hbStatuses } = await timedReports(workers, held, (w, s) => w.heartbeat(s.id));
  const { seconds, statuses } = await timedReports(workers, held, (w, s, k) =>
    w.complete(s.id, k % 10 === 9 ? ERROR : DONE),
  );
  const perSecond = claimed / seconds;
  const hbPerSecond = claimed / hbSeconds;
  const errors = [...statuses, ...hbStatuses].filter(([s]) => s !== 200).reduce((n, [, c]) => n + c, 0);
  const cost = await env.http<CostReport>('GET', `${runsPath(project)}/${run.body.id}/cost`, undefined, 200);
  const mismatches = await env.invariantMismatches();
  printTable(
    `billing (b): complete reports over HTTP with billing on, ${WORKERS} concurrent workers, one run, ` +
      `depth-${DEPTH} groups`,
    ['phase', 'reports', 'seconds', 'reports/s', 'non-200 answers', 'invariant mismatches'],
    [
      [
        'heartbeat (accrue)',
        fmtInt(claimed),
        hbSeconds.toFixed(2),
        hbPerSecond.toFixed(0),
        [...hbStatuses].filter(([s]) => s !== 200).reduce((n, [, c]) => n + c, 0),
        '-',
      ],
      [
        'complete (accrue + close)',
        fmtInt(claimed),
        seconds.toFixed(2),
        perSecond.toFixed(0),
        [...statuses].filter(([s]) => s !== 200).reduce((n, [, c]) => n + c, 0),
        mismatches.length,
      ],
    ],
    [
      `answers by status: heartbeat ${JSON.stringify(Object.fromEntries(hbStatuses))}, complete ` +
        `${JSON.stringify(Object.fromEntries(statuses))}`,
      `run cost afterwards: total ${cost.body.total_usd} USD, running ${cost.body.running_usd} USD ` +
        `(${cost.body.breakdown.map((b) => `${b.resource} ${b.usage} ${b.unit}`).join(', ')})`,
      'compare the complete row with the lifecycle suite (same shape, no heartbeat: its complete accrues from ' +
        'start); run both in one invocation.',
      ...(mismatches.length ? [`MISMATCHES, first: ${mismatches.slice(0, 3).join('; ')}`] : []),
    ],
  );
  if (cost.body.total_usd <= 0 || cost.body.running_usd !== 0)
    throw new Error(`run cost after every submission completed: ${JSON.stringify(cost.body)}`);
  return {
    results: [
      {
        suite: SUITE,
        target: `completions/s with billing on (${WORKERS} workers, depth ${DEPTH}, heartbeat each)`,
        measured: `${perSecond.toFixed(0)}/s`,
        pass: true,
        note: `informational; heartbeats ${hbPerSecond.toFixed(0)}/s; compare lifecycle`,
      },
      {
        suite: SUITE,
        target: 'throughput: non-200 answers = 0, invariant mismatches = 0',
        measured: `${errors} / ${mismatches.length}`,
        pass: errors === 0 && mismatches.length === 0,
      },
    ],
  };
}

/** Expected closed cost (USD) of a group's subtree or a run, recomputed from attempts × pinned quantities × rates. */
async function expectedClosedUsd(env: BenchEnv, runId: string, group: number | null): Promise<number> {
  const { rows } = await env.pool.query<{ usd: string | null }>(
    `SELECT (SUM(sr.quantity * EXTRACT(EPOCH FROM (a.rolled_up_to - a.started_at)) * r.rate_usd_per_unit_hour)
             / 3600)::text AS usd
       FROM billing_attempts a JOIN submission_resources sr ON sr.submission_id = a.submission_id
         JOIN resources r ON r.id = sr.resource_id
      WHERE a.run_id = $1 AND ($2::int IS NULL OR $2 = ANY(a.job_group_ids))`,
    [runId, group],
  );
  return Number(rows[0].usd ?? 0);
}

export async function runBilling(env: BenchEnv): Promise<TargetResult[]> {
  const t0 = performance.now();
  const results: TargetResult[] = [];
  log(
    `\n## billing: completion throughput with billing on (${WORKERS} workers, depth ${DEPTH}); cost reads of a ` +
      `group and run holding ${fmtInt(BIG_JOBS)} submissions vs ${SMALL_JOBS}`,
  );
  const project = await env.createProject(`bench-billing-${process.pid}`);
  const service = await env.app.get(UsersService).createUser(`bench-billing-worker-${process.pid}`, 'service');

  // (b) first: afterwards nothing of it is queued, so (a)'s claims only see (a)'s runs.
  results.push(...(await throughput(env, project, service.token)).results);

  // (a) Small run: everything through the real lifecycle, two submissions left running.
  const worker = new ReferenceWorker(httpPost(env.baseUrl, service.token), 'bench-billing-live');
  const small = await runWithChain(env, project, SMALL_JOBS, DEPTH);
  const smallLive = await driveLive(worker, SMALL_JOBS + 1, 2);
  if (smallLive.claimed !== SMALL_JOBS + 1)
    throw new Error(`small run: claimed ${smallLive.claimed}, expected ${SMALL_JOBS + 1}`);

  // Big run: 100,000 jobs over the API, a handful through the real lifecycle, the rest billed by SQL.
  const tBuild = performance.now();
  const big = await runWithChain(env, project, BIG_JOBS, BIG_REQUESTS);
  const addP50 = [...big.addMs].sort((a, b) => a - b)[big.addMs.length >> 1];
  log(
    `   (a) big run: ${fmtInt(BIG_JOBS + 1)} jobs (${fmtInt(BIG_JOBS)} under group ${big.chain[0]}) in ` +
      `${((performance.now() - tBuild) / 1000).toFixed(1)} s; ` +
      `POST .../jobs with ${fmtInt(BIG_JOBS / BIG_REQUESTS)} jobs p50 ${fmtMs(addP50)} ms`,
  );
  const bigLive = await driveLive(worker, BIG_LIVE, Math.round(BIG_LIVE * LIVE_LEFT_RUNNING));
  const tSql = performance.now();
  const bulk = await bulkBill(env, big.runId);
  log(
    `   (a) ${bigLive.claimed} big-run submissions through the worker API (${bigLive.open} left running), ` +
      `${fmtInt(bulk)} closed attempts written by SQL in ${((performance.now() - tSql) / 1000).toFixed(1)} s`,
  );
  await env.pool.query(
    'VACUUM (ANALYZE) billing_attempts, submission_resources, billing_job_usage, billing_group_usage, ' +
      'billing_run_usage, billing_daily_usage',
  );

  const counts = await env.pool.query<{ attempts: number; open: number; group_rows: number; run_rows: number }>(
    `SELECT (SELECT count(*) FROM billing_attempts WHERE run_id = $1 AND $2 = ANY(job_group_ids))::int AS attempts,
            (SELECT count(*) FROM billing_attempts WHERE run_id = $1 AND closed_at IS NULL)::int AS open,
            (SELECT count(*) FROM billing_group_usage WHERE run_id = $1 AND job_group_id = $2)::int AS group_rows,
            (SELECT count(*) FROM billing_run_usage WHERE run_id = $1)::int AS run_rows`,
    [big.runId, big.chain[0]],
  );
  const c = counts.rows[0];
  if (c.attempts !== BIG_JOBS)
    throw new Error(`big group ${big.chain[0]}: ${c.attempts} billed attempts in its subtree, expected ${BIG_JOBS}`);
  const mismatches = await env.invariantMismatches();

  // Correctness of what is about to be timed: the closed part of each cost equals attempts × quantities × rates.
  const smallGroupPath = `${runsPath(project)}/${small.runId}/job-groups/${small.chain[0]}/cost`;
  const bigGroupPath = `${runsPath(project)}/${big.runId}/job-groups/${big.chain[0]}/cost`;
  const smallRunPath = `${runsPath(project)}/${small.runId}/cost`;
  const bigRunPath = `${runsPath(project)}/${big.runId}/cost`;
  const checks: [string, string, string, number | null][] = [
    ['group, 10 submissions', smallGroupPath, small.runId, small.chain[0]],
    [`group, ${fmtInt(BIG_JOBS)} submissions`, bigGroupPath, big.runId, big.chain[0]],
    [`run, ${SMALL_JOBS + 1} submissions`, smallRunPath, small.runId, null],
    [`run, ${fmtInt(BIG_JOBS + 1)} submissions`, bigRunPath, big.runId, null],
  ];
  const costNotes: string[] = [];
  for (const [label, path, runId, g] of checks) {
    const report = (await env.http<CostReport>('GET', path, undefined, 200)).body;
    // Closed attempts' cost is fixed; running ones' closed part moves with each heartbeat, so recompute right after.
    const want = await expectedClosedUsd(env, runId, g);
    const closed = report.total_usd - report.running_usd;
    // The open attempts' rolled-up part (heartbeat to now) is in `running`, their earlier part in aggregates and in
    // `want`.
    if (Math.abs(closed - want) > 1e-6 * Math.max(1, want))
      throw new Error(`${label}: cost ${JSON.stringify(report)} has ${closed} USD accrued, attempts say ${want}`);
    costNotes.push(
      `${label}: total ${report.total_usd} USD (running ${report.running_usd}), matches attempts × quantities × rates`,
    );
  }

  const stats = await measureSideBySide(
    {
      groupSmall: () => env.getRaw(smallGroupPath),
      groupBig: () => env.getRaw(bigGroupPath),
      runSmall: () => env.getRaw(smallRunPath),
      runBig: () => env.getRaw(bigRunPath),
    },
    READ_ITERATIONS,
    5,
  );
  const groupRatio = stats.groupBig.p50 / stats.groupSmall.p50;
  const runRatio = stats.runBig.p50 / stats.runSmall.p50;
  printTable(
    `billing (a): cost read latency (ms), ${READ_ITERATIONS} interleaved iterations, order rotating`,
    ['cost of', 'submissions billed', 'p50', 'p95', 'min', 'max'],
    [
      [
        `small run, group ${small.chain[0]} (subtree depth 1..${DEPTH})`,
        fmtInt(SMALL_JOBS),
        fmtMs(stats.groupSmall.p50),
        fmtMs(stats.groupSmall.p95),
        fmtMs(stats.groupSmall.min),
        fmtMs(stats.groupSmall.max),
      ],
      [
        `big run, group ${big.chain[0]} (subtree depth 1..${DEPTH})`,
        fmtInt(BIG_JOBS),
        fmtMs(stats.groupBig.p50),
        fmtMs(stats.groupBig.p95),
        fmtMs(stats.groupBig.min),
        fmtMs(stats.groupBig.max),
      ],
      [
        'small run',
        fmtInt(SMALL_JOBS + 1),
        fmtMs(stats.runSmall.p50),
        fmtMs(stats.runSmall.p95),
        fmtMs(stats.runSmall.min),
        fmtMs(stats.runSmall.max),
      ],
      [
        'big run',
        fmtInt(BIG_JOBS + 1),
        fmtMs(stats.runBig.p50),
        fmtMs(stats.runBig.p95),
        fmtMs(stats.runBig.min),
        fmtMs(stats.runBig.max),
      ],
    ],
    [
      `ratio big/small p50: group ${fmtRatio(groupRatio)}, run ${fmtRatio(runRatio)} (target ≤ 1.5×): ` +
        `${verdict(groupRatio <= 1.5)} / ${verdict(runRatio <= 1.5)}`,
      `small run: all ${smallLive.claimed} submissions via the worker API (running, heartbeat, complete), ` +
        `${smallLive.open} left running.`,
      `big run: ${bigLive.claimed} via the worker API (${bigLive.open} left running), ${fmtInt(bulk)} closed ` +
        'attempts + quantities + usage aggregates by SQL (as BillingRepository writes them; ' +
        'their submissions stay queued).',
      `big group: ${fmtInt(c.attempts)} attempts in its subtree, ${c.group_rows} billing_group_usage rows ` +
        `(resource × token); big run: ${c.run_rows} billing_run_usage rows, ${c.open} open attempts.`,
      ...costNotes,
      `GET /admin/v1/invariants after the SQL load: ${mismatchText(mismatches)}`,
      `suite total ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    ],
  );
  results.push(
    {
      suite: SUITE,
      target: `group cost read, ${fmtInt(BIG_JOBS)} vs ${SMALL_JOBS} submissions ≤ 1.5×`,
      measured: fmtRatio(groupRatio),
      pass: groupRatio <= 1.5,
      note: `p50 ${fmtMs(stats.groupBig.p50)} vs ${fmtMs(stats.groupSmall.p50)} ms`,
    },
    {
      suite: SUITE,
      target: `run cost read, ${fmtInt(BIG_JOBS + 1)} vs ${SMALL_JOBS + 1} submissions ≤ 1.5×`,
      measured: fmtRatio(runRatio),
      pass: runRatio <= 1.5,
      note: `p50 ${fmtMs(stats.runBig.p50)} vs ${fmtMs(stats.runSmall.p50)} ms`,
    },
    {
      suite: SUITE,
      target: 'invariant mismatches after the SQL load = 0',
      measured: String(mismatches.length),
      pass: mismatches.length === 0,
    },
  );
  return results;
}
