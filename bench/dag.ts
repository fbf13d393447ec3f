import { ServerTransitionsService } from '../src/modules/lifecycle/server-transitions.service';
import { UsersService } from '../src/modules/users/users.service';
import { ERROR, DONE, httpPost, ReferenceWorker } from './reference-worker';
import {
  BenchEnv,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measure,
  median,
  mismatchText,
  printTable,
  QUICK,
  TargetResult,
  timeOnce,
} from './support';

/**
 * Dependencies between jobs (issue #13), ratios side by side in one run on PostgreSQL:
 * - claim latency p50 with 1,000,000 pending jobs in the database vs none (≤ 1.2×: pending work is never scanned);
 * - completing a parent with 10,000 children, per child, vs the per-job cost of a 10,000-job bulk submit (≤ 1×);
 * - a dependency failure cascading through 10,000 descendants, and a submit of 10,000 jobs with 100,000 edges, each
 *   vs the same submit without edges (edges ≤ 3×; the cascade is reported).
 * Everything timed goes through the HTTP API; the 1,000,000 pending jobs are one API-made batch of 10,000 cloned by
 * SQL (same rows, new ids), then checked by the app's invariants.
 */

const SUITE = 'dag';
const N = QUICK ? 1000 : 10_000;
const PENDING = QUICK ? 20_000 : 1_000_000;
const REPS = QUICK ? 2 : 3;
const CLAIMS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 20 : 200);
const EDGES_PER_JOB = 10;

const spec = (i = 0) => ({ commands: [`echo ${i}`], resources: { cpu: 0.001, memory_mib: 1 } });

interface RunBody {
  id: string;
}
interface Job {
  id: string;
  job_name: string;
}

export async function runDag(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject(`bench-dag-${process.pid}`);
  const service = await env.app.get(UsersService).createUser(`bench-dag-worker-${process.pid}`, 'service');
  const worker = new ReferenceWorker(httpPost(env.baseUrl, service.token), 'bench-dag-w');
  const runs = `/api/v1/projects/${project}/runs`;
  const submit = (body: unknown) => env.http<RunBody & { jobs: Job[] }>('POST', runs, body, 201);
  const addJobs = (runId: string, jobs: unknown[]) =>
    env.http<{ jobs: Job[] }>('POST', `${runs}/${runId}/job-groups/0/jobs`, { jobs }, 201);
  log(
    `\n## dag: claim with ${fmtInt(PENDING)} pending jobs vs none; release and cascade of ${fmtInt(N)} children; ` +
      `submit of ${fmtInt(N)} jobs with ${fmtInt(N * EDGES_PER_JOB)} edges`,
  );

  /** A run whose one job `p` is claimed and running (so its children wait); returns the run and p's submission. */
  const runningParent = async (priority: number) => {
    const run = await submit({ priority, jobs: [{ name: 'p', spec: spec() }] });
    const [s] = await worker.claim(1);
    if (!s || s.run_id !== run.body.id) throw new Error('the parent was not the first claimed');
    const r = await worker.running(s.id);
    if (r.status !== 200) throw new Error(`running: ${r.status}`);
    const parentId = (await env.pool.query<{ id: string }>('SELECT id FROM jobs WHERE run_id = $1', [run.body.id]))
      .rows[0].id;
    return { runId: run.body.id, parentId, submissionId: s.id };
  };
  const complete = async (submissionId: string, outcome = DONE) => {
    const res = await worker.complete(submissionId, outcome);
    if (res.status !== 200) throw new Error(`complete: ${res.status} ${JSON.stringify(res.body)}`);
  };
  const counts = async (runId: string) =>
    Object.fromEntries(
      (
        await env.pool.query<{ k: string; n: number }>(
          `SELECT status AS k, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY 1`,
          [runId],
        )
      ).rows.map((r) => [r.k, r.n]),
    );
  /** Stops a run and sweeps its queued jobs away, so that nothing of it is claimed later. */
  const clear = async (runId: string) => {
    await env.http('POST', `${runs}/${runId}/stop`, {}, 200);
    const sweeper = env.app.get(ServerTransitionsService);
    while ((await sweeper.sweepCancelled(10, 5000)) > 0);
  };

  // (a) Claim latency: none pending, then PENDING pending (cloned from one API-made batch). First, on a database
  // that holds no pending job at all.
  await submit({ priority: 50, jobs: [{ spec: spec(), replicas: 2 * CLAIMS + 20 }] });
  const claimOne = async () => {
    const got = await worker.claim(1);
    if (got.length !== 1) throw new Error('nothing to claim');
  };
  await env.pool.query('CHECKPOINT'); // each claim phase starts from a checkpoint (see below)
  const none = await measure(claimOne, CLAIMS, 10);
  const holder = await runningParent(1000);
  const batch = Math.min(N, PENDING);
  await addJobs(holder.runId, [{ name: 'waiting', replicas: batch, depends_on: [holder.parentId], spec: spec() }]);
  await clonePending(env, holder.runId, PENDING / batch - 1);
  // The bulk load's vacuum and checkpoint happen before the clock starts, not during the claims measured after it.
  await env.pool.query('VACUUM (ANALYZE) jobs, job_submissions, job_parents');
  await env.pool.query('CHECKPOINT');
  const pendingNow = (await counts(holder.runId)).pending;
  if (pendingNow !== PENDING) throw new Error(`pending: ${pendingNow}, expected ${PENDING}`);
  await submit({ priority: 50, jobs: [{ spec: spec(), replicas: 2 * CLAIMS + 20 }] });
  const withPending = await measure(claimOne, CLAIMS, 10);
  // Then none again (the clones deleted), so that the machine's drift between phases does not pass for a ratio:
  // the baseline is the mean of the p50s before and after.
  await dropClones(env, holder.runId);
  const noneAfter = await measure(claimOne, CLAIMS, 10);
  const noneP50 = (none.p50 + noneAfter.p50) / 2;
  const claimRatio = withPending.p50 / noneP50;

  // Warm-up of every other path once (plans, code).
  {
    const w = await runningParent(100);
    await addJobs(w.runId, [{ name: 'c', replicas: 100, depends_on: [w.parentId], spec: spec() }]);
    await complete(w.submissionId);
    await clear(w.runId);
    await submit({ priority: -1, jobs: [{ spec: spec(), replicas: 100 }] });
  }

  // (b, c, d) Side by side, REPS rounds: bulk submit without edges; with edges; release of N; cascade through N.
  const plain: number[] = [];
  const edged: number[] = [];
  const release: number[] = [];
  const cascade: number[] = [];
  for (let r = 0; r < REPS; r++) {
    plain.push(await timeOnce(() => submit({ priority: -1, jobs: Array.from({ length: N }, (_, i) => job(i, 0)) })));
    edged.push(
      await timeOnce(() => submit({ priority: -1, jobs: Array.from({ length: N }, (_, i) => job(i, EDGES_PER_JOB)) })),
    );
    const rel = await runningParent(100);
    await addJobs(rel.runId, [{ name: 'c', replicas: N, depends_on: [rel.parentId], spec: spec() }]);
    release.push(await timeOnce(() => complete(rel.submissionId)));
    const relCounts = await counts(rel.runId);
    if (relCounts.submitted !== N) throw new Error(`release: ${JSON.stringify(relCounts)}`);
    await clear(rel.runId); // nothing of it left queued ahead of the next parent
    // Two generations: N/100 children of p, each with 99 grandchildren.
    const cas = await runningParent(100);
    const kids = N / 100;
    await addJobs(cas.runId, [
      ...Array.from({ length: kids }, (_, i) => ({
        name: `c${i}`,
        ref: `c${i}`,
        depends_on: [cas.parentId],
        spec: spec(),
      })),
      ...Array.from({ length: kids }, (_, i) => ({ name: `g${i}`, replicas: 99, depends_on: [`c${i}`], spec: spec() })),
    ]);
    cascade.push(await timeOnce(() => complete(cas.submissionId, ERROR)));
    const casCounts = await counts(cas.runId);
    if (casCounts.terminated !== N) throw new Error(`cascade: ${JSON.stringify(casCounts)}`);
  }
  const perJobSubmit = median(plain) / N;
  const perChildRelease = median(release) / N;
  const releaseRatio = perChildRelease / perJobSubmit;
  const edgesRatio = median(edged) / median(plain);
  const cascadeRatio = median(cascade) / median(plain);

  const mismatches = await env.invariantMismatches();

  printTable(
    `dag: side by side (${REPS} rounds; medians) and claims (${CLAIMS} each)`,
    ['measure', 'ms', 'per job', 'ratio', 'target'],
    [
      [`bulk submit, ${fmtInt(N)} jobs, no edges`, fmtMs(median(plain)), fmtMs(perJobSubmit), '1.00×', 'baseline'],
      [
        `submit, ${fmtInt(N)} jobs, ${fmtInt(N * EDGES_PER_JOB)} edges`,
        fmtMs(median(edged)),
        fmtMs(median(edged) / N),
        fmtRatio(edgesRatio),
        '≤ 3×',
      ],
      [
        `complete a parent of ${fmtInt(N)}: release`,
        fmtMs(median(release)),
        fmtMs(perChildRelease),
        fmtRatio(releaseRatio),
        '≤ 1×',
      ],
      [
        `fail a parent: cascade through ${fmtInt(N)}`,
        fmtMs(median(cascade)),
        fmtMs(median(cascade) / N),
        fmtRatio(cascadeRatio),
        'reported',
      ],
      [
        `claim p50, no pending jobs (before ${fmtMs(none.p50)}, after ${fmtMs(noneAfter.p50)})`,
        fmtMs(noneP50),
        '-',
        '1.00×',
        'baseline',
      ],
      [`claim p50, ${fmtInt(PENDING)} pending jobs`, fmtMs(withPending.p50), '-', fmtRatio(claimRatio), '≤ 1.2×'],
    ],
    [`invariants after: ${mismatchText(mismatches)}`],
  );
  if (mismatches.length > 0) throw new Error(`invariants: ${mismatchText(mismatches)}`);
  return [
    {
      suite: SUITE,
      target: `claim p50 with ${fmtInt(PENDING)} pending jobs ≤ 1.2× none`,
      measured: `${fmtMs(withPending.p50)} vs ${fmtMs(noneP50)} ms = ${fmtRatio(claimRatio)}`,
      pass: claimRatio <= 1.2,
    },
    {
      suite: SUITE,
      target: `release of ${fmtInt(N)} children per child ≤ 1× bulk submit per job`,
      measured: `${fmtMs(perChildRelease)} vs ${fmtMs(perJobSubmit)} ms = ${fmtRatio(releaseRatio)}`,
      pass: releaseRatio <= 1,
    },
    {
      suite: SUITE,
      target: `submit ${fmtInt(N)} jobs with ${fmtInt(N * EDGES_PER_JOB)} edges ≤ 3× without`,
      measured: fmtRatio(edgesRatio),
      pass: edgesRatio <= 3,
    },
    {
      suite: SUITE,
      target: `cascade through ${fmtInt(N)} descendants vs submit of ${fmtInt(N)} (reported; edges ≤ 3×)`,
      measured: fmtRatio(cascadeRatio),
      pass: cascadeRatio <= 3,
    },
  ];
}

/** Job `i` of a submit, depending on the `edges` jobs before it (by ref). */
function job(i: number, edges: number) {
  const parents = Array.from({ length: Math.min(edges, i) }, (_, k) => `j${i - 1 - k}`);
  return { name: `j${i}`, ref: `j${i}`, ...(edges > 0 ? { depends_on: parents } : {}), spec: spec(i) };
}

/**
 * Copies the run's pending jobs `copies` times by SQL (new ids, job numbers after the last; each copy's submission 0
 * and edge to the same parent), and counts them on the run's root: rows exactly like those the API wrote.
 */
async function clonePending(env: BenchEnv, runId: string, copies: number): Promise<void> {
  for (let c = 0; c < copies; c++) {
    await env.pool.query(
      `WITH src AS (
         SELECT j.*, gen_random_uuid() AS new_id, gen_random_uuid() AS new_sub,
                (SELECT max(job_num) FROM jobs WHERE run_id = $1) + 1 AS base
           FROM jobs j WHERE j.run_id = $1 AND j.status = 'pending' AND j.job_num = (
             SELECT min(job_num) FROM jobs WHERE run_id = $1 AND status = 'pending')
       ), jobs_in AS (
         INSERT INTO jobs (id, run_id, job_group_id, job_num, replica_num, job_name, spec, always_run, status,
                           latest_submission_id, latest_submission_num, submission_count, n_parents, n_pending_parents)
         SELECT new_id, run_id, job_group_id, base, replica_num, job_name, spec, always_run, status, new_sub, 0, 1,
                n_parents, n_pending_parents FROM src
         RETURNING id
       ), subs_in AS (
         INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, priority, cpu,
                                      memory_mib, gpu, needs_container)
         SELECT s.new_sub, s.new_id, s.run_id, s.job_group_id, 0, 'pending', x.priority, x.cpu, x.memory_mib, x.gpu,
                x.needs_container
           FROM src s JOIN job_submissions x ON x.id = s.latest_submission_id
         RETURNING id
       )
       INSERT INTO job_parents (job_id, parent_id, run_id)
       SELECT s.new_id, e.parent_id, s.run_id FROM src s JOIN job_parents e ON e.job_id = s.id`,
      [runId],
    );
  }
  await env.pool.query(
    // The root's job count, summed over its token rows, is the run's jobs: the difference goes on token 0.
    `UPDATE job_group_counters c SET n_jobs = (SELECT count(*) FROM jobs WHERE run_id = $1) -
              (SELECT coalesce(sum(n_jobs), 0) FROM job_group_counters o
                WHERE o.run_id = $1 AND o.job_group_id = 0 AND o.token <> 0)
      WHERE c.run_id = $1 AND c.job_group_id = 0 AND c.token = 0`,
    [runId],
  );
}

/** Deletes the pending jobs clonePending made (the first batch stays) and puts the root's job count back. */
async function dropClones(env: BenchEnv, runId: string): Promise<void> {
  await env.pool.query(
    `DELETE FROM jobs WHERE run_id = $1 AND status = 'pending'
        AND job_num > (SELECT min(job_num) FROM jobs WHERE run_id = $1 AND status = 'pending')`,
    [runId],
  );
  await env.pool.query(
    // The root's job count, summed over its token rows, is the run's jobs: the difference goes on token 0.
    `UPDATE job_group_counters c SET n_jobs = (SELECT count(*) FROM jobs WHERE run_id = $1) -
              (SELECT coalesce(sum(n_jobs), 0) FROM job_group_counters o
                WHERE o.run_id = $1 AND o.job_group_id = 0 AND o.token <> 0)
      WHERE c.run_id = $1 AND c.job_group_id = 0 AND c.token = 0`,
    [runId],
  );
  await env.pool.query('VACUUM (ANALYZE) jobs, job_submissions, job_parents');
  await env.pool.query('CHECKPOINT');
}
