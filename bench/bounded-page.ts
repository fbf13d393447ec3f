import { performance } from 'node:perf_hooks';
import {
  BenchEnv,
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measureSideBySide,
  printTable,
  QUICK,
  TargetResult,
} from './support';

/**
 * Bounded pages (issue #17, "An unbounded page"): GET /projects/{p}/runs with default parameters (limit 20,
 * jobs_limit 100, job_submissions_limit 10) over 20 runs of 10,000 jobs, side by side with the same page over 20
 * small runs. Before the fix such a page over 18 big runs was 139 MB in 8.1 s.
 *
 * "Small" is a run whose jobs all fit the page (100 jobs: the same rows returned, so the ratio is the cost of what
 * the big runs hold but the page does not show); a page over runs of 4 jobs is timed too, for the record.
 * Targets: the big page < 5 MB, and its p50 ≤ 2× the small page's.
 */

const SUITE = 'bounded-page';
const RUNS = QUICK ? 5 : 20;
const BIG_JOBS = QUICK ? 1000 : 10_000;
const SMALL_JOBS = 100;
const TINY_JOBS = 4;
const ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 5 : 30);
const WARMUP = QUICK ? 1 : 3;
const MAX_BYTES = 5 * 1000 * 1000;
const MAX_RATIO = 2;

const spec = (i: number) => ({
  commands: [`python train.py --shard ${i}`, 'python eval.py'],
  image: 'ghcr.io/example/trainer:2026.07.1',
  env: { SHARD: String(i), DATA: `s3://bucket/shards/${i}` },
  resources: { cpu: 1, memory_mib: 1024 },
});

/** A run of `n` jobs as entries of up to 100 replicas each (job_num × replica_num, as sweeps are written). */
const runBody = (n: number) => ({
  jobs: Array.from({ length: Math.ceil(n / 100) }, (_, i) => ({ spec: spec(i), replicas: Math.min(100, n - i * 100) })),
});

interface Page {
  items: { job_counts: Record<string, number>; jobs: unknown[]; jobs_truncated: boolean }[];
}

export async function runBoundedPage(env: BenchEnv): Promise<TargetResult[]> {
  const projects = {
    big: await env.createProject('bench-bounded-big'),
    small: await env.createProject('bench-bounded-small'),
    tiny: await env.createProject('bench-bounded-tiny'),
  };
  const sizes = { big: BIG_JOBS, small: SMALL_JOBS, tiny: TINY_JOBS };
  const t0 = performance.now();
  for (const kind of ['big', 'small', 'tiny'] as const) {
    for (let r = 0; r < RUNS; r++)
      await env.http('POST', `/api/v1/projects/${projects[kind]}/runs`, runBody(sizes[kind]), 201);
  }
  log(
    `loaded ${RUNS} runs × ${fmtInt(BIG_JOBS)} jobs, ${RUNS} × ${SMALL_JOBS} and ${RUNS} × ${TINY_JOBS} through ` +
      `the API in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  await env.pool.query('ANALYZE');
  await env.assertInvariants('loading');

  // Exactness first: every big run shows its first 100 jobs, truncated, with every job counted; small ones whole.
  const pageUrl = (kind: keyof typeof projects) => `/api/v1/projects/${projects[kind]}/runs`;
  for (const kind of ['big', 'small', 'tiny'] as const) {
    const { body } = await env.http<Page>('GET', pageUrl(kind), undefined, 200);
    const shown = Math.min(sizes[kind], 100);
    const wrong = body.items.filter(
      (r) =>
        r.jobs.length !== shown || r.jobs_truncated !== sizes[kind] > 100 || r.job_counts.submitted !== sizes[kind],
    );
    if (body.items.length !== RUNS || wrong.length > 0)
      throw new Error(
        `${kind} page: ${body.items.length} runs, ${wrong.length} with wrong jobs/jobs_truncated/job_counts`,
      );
  }

  const bytes = { big: 0, small: 0, tiny: 0 };
  const timed = await measureSideBySide(
    {
      big: async () => (bytes.big = await env.getRaw(pageUrl('big'))),
      small: async () => (bytes.small = await env.getRaw(pageUrl('small'))),
      tiny: async () => (bytes.tiny = await env.getRaw(pageUrl('tiny'))),
    },
    ITERATIONS,
    WARMUP,
  );
  const ratio = timed.big.p50 / timed.small.p50;
  const rows = (['big', 'small', 'tiny'] as const).map((k) => [
    `${RUNS} runs × ${fmtInt(sizes[k])} jobs`,
    fmtInt(RUNS * Math.min(sizes[k], 100)),
    fmtBytes(bytes[k]),
    fmtMs(timed[k].p50),
    fmtMs(timed[k].p95),
    fmtRatio(timed[k].p50 / timed.small.p50),
  ]);
  printTable(
    `${SUITE}: GET /projects/{p}/runs, default parameters (limit 20, jobs_limit 100, job_submissions_limit 10), ` +
      `${ITERATIONS} iterations side by side`,
    ['page over', 'jobs shown', 'bytes', 'p50 ms', 'p95 ms', 'p50 / small'],
    rows,
    [`before the fix: 18 runs × 10,000 jobs at limit=20 answered 139 MB in 8.1 s (issue #17)`],
  );
  return [
    {
      suite: SUITE,
      target: `page over ${RUNS} runs × ${fmtInt(BIG_JOBS)} jobs < 5 MB`,
      measured: fmtBytes(bytes.big),
      pass: bytes.big < MAX_BYTES,
    },
    {
      suite: SUITE,
      target: `its p50 ≤ 2× a page over ${RUNS} small runs (${SMALL_JOBS} jobs each, same jobs shown)`,
      measured: fmtRatio(ratio),
      pass: ratio <= MAX_RATIO,
      note:
        `${fmtMs(timed.big.p50)} vs ${fmtMs(timed.small.p50)} ms; vs runs of ${TINY_JOBS} jobs: ` +
        `${fmtRatio(timed.big.p50 / timed.tiny.p50)}`,
    },
  ];
}
