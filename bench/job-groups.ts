import { performance } from 'node:perf_hooks';
import {
  BenchEnv,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measureSideBySide,
  median,
  mismatchText,
  printTable,
  QUICK,
  stats,
  TargetResult,
  timeOnce,
  verdict,
} from './support';

/**
 * Job groups (targets.md, "Job groups" and "Bulk and billing"): submitting one run of 10,000 jobs; cancelling a
 * group whose subtree holds 100,000 jobs vs one holding 10; reading a cancelled depth-5 subtree vs an uncancelled one.
 * Everything goes through the HTTP API.
 */

const SUITE = 'job-groups';
const PROJECT = 'bench-groups';
const SUBMIT_JOBS = QUICK ? 2000 : 10_000;
const SUBMIT_REPS = 3;
const BIG_JOBS = QUICK ? 10_000 : 100_000;
const BIG_REQUESTS = 10; // BIG_JOBS in 10 requests, 2 per level of the depth-5 chain
const BIG_GROUPS = QUICK ? 2 : 5;
const SMALL_GROUPS = 5;
const SMALL_JOBS = 10;
const DEPTH = 5;
const READ_ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 10 : 30);

const spec = (i = 0) => ({
  commands: [`python shard.py --index ${i}`],
  image: 'python:3.12',
  resources: { cpu: 1, memory_mib: 1024 },
});

interface RunBody {
  id: string;
  jobs: unknown[];
  job_counts: Record<string, number>;
}
interface GroupBody {
  job_group_id: number;
  depth: number;
  status: string;
  state: string;
  cancellation: { job_group_id: number; reason: string } | null;
  counts: { n_jobs: number; n_completed: number; n_cancelled: number };
}
interface JobsPage {
  items: {
    id: string;
    status: string;
    termination_reason: string | null;
    cancelled_job_group_id: number | null;
    job_group_id: number;
  }[];
  next_cursor: string | null;
}

const runPath = (runId: string) => `/api/v1/projects/${PROJECT}/runs/${runId}`;

/** A run (one job at the root) with a chain of `DEPTH` groups below the root; returns the chain, top first. */
async function runWithChain(env: BenchEnv): Promise<{ runId: string; chain: number[] }> {
  const run = await env.http<RunBody>('POST', `/api/v1/projects/${PROJECT}/runs`, { jobs: [{ spec: spec() }] }, 201);
  const chain: number[] = [];
  for (let d = 0; d < DEPTH; d++) {
    const g = await env.http<GroupBody>(
      'POST',
      `${runPath(run.body.id)}/job-groups`,
      { parent_id: chain.length ? chain[chain.length - 1] : 0 },
      201,
    );
    if (g.body.depth !== d + 1) throw new Error(`group depth ${g.body.depth}, expected ${d + 1}`);
    chain.push(g.body.job_group_id);
  }
  return { runId: run.body.id, chain };
}

/** Adds `total` jobs to the chain in `requests` requests spread evenly over its levels; returns each request's ms. */
async function fillChain(
  env: BenchEnv,
  runId: string,
  chain: number[],
  total: number,
  requests: number,
): Promise<number[]> {
  const per = total / requests;
  if (!Number.isInteger(per) || requests % chain.length !== 0) throw new Error('uneven fill');
  const ms: number[] = [];
  for (let r = 0; r < requests; r++) {
    const g = chain[Math.floor((r * chain.length) / requests)];
    let count = 0;
    ms.push(
      await timeOnce(async () => {
        const res = await env.http<{ jobs: unknown[] }>(
          'POST',
          `${runPath(runId)}/job-groups/${g}/jobs`,
          { jobs: [{ spec: spec(r), replicas: per }] },
          201,
        );
        count = res.body.jobs.length;
      }),
    );
    if (count !== per) throw new Error(`added ${count} jobs, expected ${per}`);
  }
  return ms;
}

async function group(env: BenchEnv, runId: string, g: number): Promise<GroupBody> {
  return (await env.http<GroupBody>('GET', `${runPath(runId)}/job-groups/${g}`, undefined, 200)).body;
}

export async function runJobGroups(env: BenchEnv): Promise<TargetResult[]> {
  const t0 = performance.now();
  const results: TargetResult[] = [];
  log(
    `\n## job-groups: one run of ${fmtInt(SUBMIT_JOBS)} jobs; cancel of ${BIG_GROUPS} groups holding ` +
      `${fmtInt(BIG_JOBS)} jobs vs ${SMALL_GROUPS} holding ${SMALL_JOBS}; reads under a cancelled depth-${DEPTH} ` +
      `subtree`,
  );
  await env.createProject(PROJECT);

  // (a) One run of 10,000 jobs, end to end (request, validation, one transaction, 201 body with every job read).
  const shapes: { label: string; body: () => unknown }[] = [
    {
      label: `1 job entry × ${fmtInt(SUBMIT_JOBS)} replicas`,
      body: () => ({ jobs: [{ spec: spec(), replicas: SUBMIT_JOBS }] }),
    },
    {
      label: `${fmtInt(SUBMIT_JOBS)} job entries × 1 replica`,
      body: () => ({ jobs: Array.from({ length: SUBMIT_JOBS }, (_, i) => ({ name: `shard-${i}`, spec: spec(i) })) }),
    },
  ];
  // Warm-up (code paths, plans): one small run of each shape.
  await env.http('POST', `/api/v1/projects/${PROJECT}/runs`, { jobs: [{ spec: spec(), replicas: 100 }] }, 201);
  await env.http(
    'POST',
    `/api/v1/projects/${PROJECT}/runs`,
    { jobs: Array.from({ length: 100 }, (_, i) => ({ spec: spec(i) })) },
    201,
  );
  const submitRows: (string | number)[][] = [];
  for (const shape of shapes) {
    const samples: number[] = [];
    for (let rep = 0; rep < SUBMIT_REPS; rep++) {
      const body = shape.body();
      let n = 0;
      let bytes = 0;
      samples.push(
        await timeOnce(async () => {
          const res = await env.http<RunBody>('POST', `/api/v1/projects/${PROJECT}/runs`, body, 201);
          // The answer shows the first jobs_limit jobs; job_counts counts them all.
          n = Object.values(res.body.job_counts).reduce((a, b) => a + b, 0);
          bytes = res.bytes;
        }),
      );
      if (n !== SUBMIT_JOBS) throw new Error(`run came back with ${n} jobs, expected ${SUBMIT_JOBS}`);
      if (rep === 0) log(`   submit (${shape.label}): response ${fmtInt(bytes)} bytes`);
    }
    const med = median(samples);
    const pass = med <= 5000;
    submitRows.push([shape.label, ...samples.map((s) => fmtMs(s)), fmtMs(med), '≤ 5000', verdict(pass)]);
    results.push({
      suite: SUITE,
      target: `submit one run of ${fmtInt(SUBMIT_JOBS)} jobs (${shape.label}) ≤ 5 s`,
      measured: `median ${(med / 1000).toFixed(2)} s`,
      pass,
    });
  }
  printTable(
    `job-groups: submitting one run of ${fmtInt(SUBMIT_JOBS)} jobs, POST /projects/{p}/runs end to end (ms)`,
    ['request shape', 'rep 1', 'rep 2', 'rep 3', 'median', 'target', 'verdict'],
    submitRows,
    [
      'end to end = JSON body sent, validated, one transaction (run, group 0, jobs, submissions, counters), 201 ' +
        'with every job in the body read.',
    ],
  );

  // (b) Cancellation latency: big groups (BIG_JOBS in their depth-5 subtree) vs small ones (10 jobs, same shape).
  // One extra big run stays uncancelled, as the reference for (c).
  const tBuild = performance.now();
  const big: { runId: string; chain: number[] }[] = [];
  const buildMs: number[] = [];
  for (let i = 0; i < BIG_GROUPS + 1; i++) {
    const r = await runWithChain(env);
    buildMs.push(...(await fillChain(env, r.runId, r.chain, BIG_JOBS, BIG_REQUESTS)));
    big.push(r);
    log(
      `   big run ${i + 1}/${BIG_GROUPS + 1}: ${fmtInt(BIG_JOBS)} jobs under group ${r.chain[0]} (depth ` +
        `1..${DEPTH}), built (${((performance.now() - tBuild) / 1000).toFixed(0)} s so far)`,
    );
  }
  const small: { runId: string; chain: number[] }[] = [];
  for (let i = 0; i < SMALL_GROUPS + 2; i++) {
    const r = await runWithChain(env);
    await fillChain(env, r.runId, r.chain, SMALL_JOBS, DEPTH);
    small.push(r);
  }
  const addStats = stats(buildMs);
  log(
    `   built in ${((performance.now() - tBuild) / 1000).toFixed(0)} s; POST job-groups/{g}/jobs with ` +
      `${fmtInt(BIG_JOBS / BIG_REQUESTS)} jobs: p50 ${fmtMs(addStats.p50)} ms, p95 ${fmtMs(addStats.p95)} ms over ` +
      `${addStats.n} requests`,
  );
  await env.pool.query(
    'VACUUM (ANALYZE) jobs, job_submissions, job_group_counters, job_groups, job_group_self_and_ancestors',
  );
  await env.assertInvariants('building the groups through the API');
  const bigRuns = new Set(big.map((b) => b.runId));
  for (const r of [...big, ...small]) {
    const g = await group(env, r.runId, r.chain[0]);
    const want = bigRuns.has(r.runId) ? BIG_JOBS : SMALL_JOBS;
    if (g.counts.n_jobs !== want)
      throw new Error(`group ${r.chain[0]} of run ${r.runId} counts ${g.counts.n_jobs} jobs, expected ${want}`);
  }

  const cancel = async (r: { runId: string; chain: number[] }) => {
    const res = await env.http<{ job_group_id: number }>(
      'POST',
      `${runPath(r.runId)}/job-groups/${r.chain[0]}/cancel`,
      { reason: 'bench' },
      200,
    );
    if (res.body.job_group_id !== r.chain[0]) throw new Error(`cancel returned group ${res.body.job_group_id}`);
  };
  // Warm-up: two small cancels, untimed. Then big and small alternate.
  await cancel(small[SMALL_GROUPS]);
  await cancel(small[SMALL_GROUPS + 1]);
  const bigMs: number[] = [];
  const smallMs: number[] = [];
  for (let i = 0; i < Math.max(BIG_GROUPS, SMALL_GROUPS); i++) {
    if (i < BIG_GROUPS) bigMs.push(await timeOnce(() => cancel(big[i])));
    if (i < SMALL_GROUPS) smallMs.push(await timeOnce(() => cancel(small[i])));
  }
  // Every read afterwards sees the subtree as cancelled.
  for (const [r, n] of [
    ...big.slice(0, BIG_GROUPS).map((r) => [r, BIG_JOBS] as const),
    ...small.slice(0, SMALL_GROUPS).map((r) => [r, SMALL_JOBS] as const),
  ]) {
    for (const g of r.chain) {
      const v = await group(env, r.runId, g);
      if (v.status !== 'cancelled' || v.cancellation?.job_group_id !== r.chain[0])
        throw new Error(
          `group ${g} of run ${r.runId} after cancel: status ${v.status}, cancellation ` +
            `${JSON.stringify(v.cancellation)}`,
        );
      if (g === r.chain[0] && (v.counts.n_cancelled !== n || v.counts.n_completed !== n))
        throw new Error(`group ${g} after cancel counts ${JSON.stringify(v.counts)}, expected ${n} cancelled`);
    }
  }
  const afterCancel = await env.invariantMismatches();
  const bigP50 = median(bigMs);
  const smallP50 = median(smallMs);
  const cancelRatio = bigP50 / smallP50;
  printTable(
    `job-groups: POST .../job-groups/{g}/cancel latency (ms), one-shot per group, big and small alternating`,
    ['group subtree', 'samples', 'p50', 'min', 'max'],
    [
      [
        `${fmtInt(BIG_JOBS)} jobs, depth 1..${DEPTH}`,
        bigMs.map((x) => fmtMs(x)).join(', '),
        fmtMs(bigP50),
        fmtMs(Math.min(...bigMs)),
        fmtMs(Math.max(...bigMs)),
      ],
      [
        `${SMALL_JOBS} jobs, depth 1..${DEPTH}`,
        smallMs.map((x) => fmtMs(x)).join(', '),
        fmtMs(smallP50),
        fmtMs(Math.min(...smallMs)),
        fmtMs(Math.max(...smallMs)),
      ],
    ],
    [
      `ratio big/small p50 = ${fmtRatio(cancelRatio)} (target ≤ 2×): ${verdict(cancelRatio <= 2)}`,
      `small groups live in runs of their own (11 jobs), big ones in runs of ${fmtInt(BIG_JOBS + 1)}: anything ` +
        `proportional to run size would show.`,
      'checked afterwards: every group of each cancelled chain reads status=cancelled with the cancellation of the ' +
        'top group, counts n_cancelled = subtree size.',
      `GET /admin/v1/invariants afterwards: ${mismatchText(afterCancel)}`,
    ],
  );
  results.push({
    suite: SUITE,
    target: `cancel: ${fmtInt(BIG_JOBS)}-job subtree ≤ 2 × ${SMALL_JOBS}-job subtree (p50)`,
    measured: `${fmtMs(bigP50)} / ${fmtMs(smallP50)} ms = ${fmtRatio(cancelRatio)}`,
    pass: cancelRatio <= 2,
  });

  // (c) Reads after cancel: the same depth-5 subtree shape, cancelled vs not.
  const cancelled = big[0];
  const reference = big[BIG_GROUPS];
  const jobsPath = (r: { runId: string; chain: number[] }, q: string) =>
    `${runPath(r.runId)}/job-groups/${r.chain[0]}/jobs?recursive=true&limit=100${q}`;
  const check = async (r: { runId: string; chain: number[] }, q: string, status: string) => {
    const page = (await env.http<JobsPage>('GET', jobsPath(r, q), undefined, 200)).body;
    if (page.items.length !== 100 || page.items.some((j) => j.status !== status)) {
      throw new Error(
        `GET ${jobsPath(r, q)}: ${page.items.length} items, statuses ` +
          `${[...new Set(page.items.map((j) => j.status))].join(',')}; expected 100 ${status}`,
      );
    }
    if (
      status === 'terminated' &&
      page.items.some((j) => j.cancelled_job_group_id !== r.chain[0] || j.termination_reason !== 'job_group_cancelled')
    ) {
      throw new Error(`cancelled subtree jobs do not name group ${r.chain[0]} / job_group_cancelled`);
    }
  };
  const readRows: (string | number)[][] = [];
  const variants = [
    { label: 'recursive=true&limit=100', qc: '', qr: '', sc: 'terminated', sr: 'submitted', target: true },
    {
      label: '… &status=<effective status>',
      qc: '&status=terminated',
      qr: '&status=submitted',
      sc: 'terminated',
      sr: 'submitted',
      target: false,
    },
    { label: '… second page (cursor)', qc: 'CURSOR', qr: 'CURSOR', sc: 'terminated', sr: 'submitted', target: false },
  ];
  for (const v of variants) {
    let qc = v.qc;
    let qr = v.qr;
    if (v.qc === 'CURSOR') {
      const pc = (await env.http<JobsPage>('GET', jobsPath(cancelled, ''), undefined, 200)).body;
      const pr = (await env.http<JobsPage>('GET', jobsPath(reference, ''), undefined, 200)).body;
      qc = `&cursor=${pc.next_cursor}`;
      qr = `&cursor=${pr.next_cursor}`;
    }
    await check(cancelled, qc, v.sc);
    await check(reference, qr, v.sr);
    const s = await measureSideBySide(
      { cancelled: () => env.getRaw(jobsPath(cancelled, qc)), uncancelled: () => env.getRaw(jobsPath(reference, qr)) },
      READ_ITERATIONS,
      3,
    );
    const ratio = s.cancelled.p50 / s.uncancelled.p50;
    readRows.push([
      v.label,
      fmtMs(s.uncancelled.p50),
      fmtMs(s.uncancelled.p95),
      fmtMs(s.cancelled.p50),
      fmtMs(s.cancelled.p95),
      fmtRatio(ratio),
      v.target ? '≤ 1.5×' : '(info)',
      v.target ? verdict(ratio <= 1.5) : '-',
    ]);
    if (v.target)
      results.push({
        suite: SUITE,
        target: `reads: GET job-groups/{g}/jobs on a cancelled depth-${DEPTH} subtree ≤ 1.5 × uncancelled (p50)`,
        measured: `${fmtMs(s.cancelled.p50)} / ${fmtMs(s.uncancelled.p50)} ms = ${fmtRatio(ratio)}`,
        pass: ratio <= 1.5,
      });
  }
  printTable(
    `job-groups: GET .../job-groups/{g}/jobs on a depth-${DEPTH} subtree of ${fmtInt(BIG_JOBS)} jobs, cancelled vs ` +
      `the same shape uncancelled (ms, ${READ_ITERATIONS} iterations, interleaved)`,
    ['query', 'uncancelled p50', 'p95', 'cancelled p50', 'p95', 'cancelled/uncancelled', 'target', 'verdict'],
    readRows,
    [
      'every page is checked first: 100 jobs, effective status terminated (job_group_cancelled, naming the ' +
        'cancelled group) vs submitted.',
    ],
  );
  log(`\n   job-groups finished in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  return results;
}
