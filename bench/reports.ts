import { performance } from 'node:perf_hooks';
import { UsersService } from '../src/modules/users/users.service';
import { claimAndStartAll, DONE, ERROR, httpPost, type Post, ReferenceWorker } from './reference-worker';
import { BenchEnv, fmtInt, fmtRatio, log, median, printTable, QUICK, TargetResult } from './support';

const WORKERS = 8;
const JOBS_PER_LEVEL = QUICK ? 50 : 400; // × 6 levels (root + depth 1..5) per run
const BATCH = 25;
const ROUNDS = QUICK ? 1 : 3;

/** One run of JOBS_PER_LEVEL × 6 jobs over a depth-5 chain of groups, every job claimed and reported running. */
async function heldRun(env: BenchEnv, project: string, workers: ReferenceWorker[]) {
  const spec = { commands: ['sleep 1'], resources: { cpu: 1, memory_mib: 512 } };
  const runs = `/api/v1/projects/${project}/runs`;
  const run = await env.http<{ id: string }>('POST', runs, { jobs: [{ spec, replicas: JOBS_PER_LEVEL }] }, 201);
  let parent = 0;
  for (let depth = 1; depth <= 5; depth++) {
    const g = await env.http<{ job_group_id: number }>(
      'POST',
      `${runs}/${run.body.id}/job-groups`,
      { parent_id: parent },
      201,
    );
    parent = g.body.job_group_id;
    await env.http('POST', `${runs}/${run.body.id}/job-groups/${parent}/jobs`, {
      jobs: [{ spec, replicas: JOBS_PER_LEVEL }],
    });
  }
  return claimAndStartAll(workers);
}

/**
 * Completes every held submission, all workers at once: one `complete` call per report, or batches of BATCH
 * reports through POST /internal/v1/submissions/reports. Returns reports per second and the non-200 results.
 */
async function completeAll(
  post: Post,
  workers: ReferenceWorker[],
  held: { id: string }[][],
  batched: boolean,
): Promise<{ perSecond: number; failed: number }> {
  let failed = 0;
  let n = 0;
  const started = performance.now();
  await Promise.all(
    workers.map(async (w, i) => {
      const mine = held[i];
      const outcome = (k: number) => (k % 10 === 9 ? ERROR : DONE);
      if (!batched) {
        for (const [k, s] of mine.entries()) {
          if ((await w.complete(s.id, outcome(k))).status !== 200) failed++;
          n++;
        }
        return;
      }
      for (let k = 0; k < mine.length; k += BATCH) {
        const reports = mine
          .slice(k, k + BATCH)
          .map((s, j) => ({ submission_id: s.id, kind: 'complete', ...outcome(k + j) }));
        const res = await post('/internal/v1/submissions/reports', { worker_id: w.workerId, reports });
        if (res.status !== 200) throw new Error(`reports: ${res.status} ${JSON.stringify(res.body)}`);
        for (const r of res.body.results as { status_code: number }[]) if (r.status_code !== 200) failed++;
        n += reports.length;
      }
    }),
  );
  return { perSecond: n / ((performance.now() - started) / 1000), failed };
}

/**
 * Batched worker reports (issue #19): complete reports per second with 8 workers, one call per report against
 * batches of 25 through POST /internal/v1/submissions/reports, alternated over fresh runs of the lifecycle bench's
 * shape (one run, depth-5 groups, 10 % of outcomes failed), then the invariants.
 */
export async function runReports(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject(`bench-reports-${process.pid}`);
  const service = await env.app.get(UsersService).createUser(`bench-reports-worker-${process.pid}`, 'service');
  const post = httpPost(env.baseUrl, service.token);
  const workers = Array.from({ length: WORKERS }, (_, i) => new ReferenceWorker(post, `bench-r${i}`));
  const figures: Record<'single' | 'batched', number[]> = { single: [], batched: [] };
  let failed = 0;
  for (let round = 0; round < ROUNDS; round++)
    for (const mode of round % 2 === 0 ? (['single', 'batched'] as const) : (['batched', 'single'] as const)) {
      const held = await heldRun(env, project, workers);
      const got = await completeAll(post, workers, held, mode === 'batched');
      figures[mode].push(got.perSecond);
      failed += got.failed;
    }
  const mismatches = await env.invariantMismatches();
  const single = median(figures.single);
  const batched = median(figures.batched);
  log(`reports: ${fmtInt(JOBS_PER_LEVEL * 6)} jobs per run, ${ROUNDS} rounds each way, ${WORKERS} workers`);
  printTable(
    `reports: complete reports/s, one call each against batches of ${BATCH} (alternated; medians)`,
    ['mode', 'reports/s (each round)', 'median', 'ratio'],
    [
      ['one call per report', figures.single.map((x) => x.toFixed(0)).join(', '), single.toFixed(0), '1.00×'],
      [
        `batches of ${BATCH}`,
        figures.batched.map((x) => x.toFixed(0)).join(', '),
        batched.toFixed(0),
        fmtRatio(batched / single),
      ],
    ],
    [`non-200 results: ${failed}; invariant mismatches: ${mismatches.length}`],
  );
  return [
    {
      suite: 'reports',
      target: `batched reports of ${BATCH} ≥ 4× the single-report figure (issue #19)`,
      measured: `${batched.toFixed(0)} vs ${single.toFixed(0)}/s = ${fmtRatio(batched / single)}`,
      pass: batched >= 4 * single,
      note: 'reports arriving together share a transaction, single calls too',
    },
    {
      suite: 'reports',
      target: 'non-200 results and invariant mismatches after = 0',
      measured: `${failed}, ${mismatches.length}`,
      pass: failed === 0 && mismatches.length === 0,
    },
  ];
}
