import { UsersService } from '../src/modules/users/users.service';
import { claimAndStartAll, DONE, ERROR, httpPost, ReferenceWorker, timedReports } from './reference-worker';
import { BenchEnv, fmtInt, log, printTable, QUICK, TargetResult } from './support';

const WORKERS = Number(process.env.BENCH_WORKERS ?? 8); // the target is for 8
const JOBS_PER_LEVEL = QUICK ? 100 : 800; // × 6 levels (root + depth 1..5)

/**
 * Completion reports per second over HTTP with 8 concurrent reference workers, all jobs of one run spread over a
 * depth-5 chain of groups (every report updates 1-6 counter rows, the root's being the hottest), then the
 * invariants. Claims and `running` reports happen before the clock starts: the figure is `complete` calls only.
 */
export async function runLifecycle(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject(`bench-lifecycle-${process.pid}`);
  const service = await env.app.get(UsersService).createUser(`bench-worker-${process.pid}`, 'service');
  const spec = { commands: ['sleep 1'], resources: { cpu: 1, memory_mib: 512 } };
  const run = await env.http<{ id: string }>(
    'POST',
    `/api/v1/projects/${project}/runs`,
    { jobs: [{ spec, replicas: JOBS_PER_LEVEL }] },
    201,
  );
  let parent = 0;
  for (let depth = 1; depth <= 5; depth++) {
    const g = await env.http<{ job_group_id: number }>(
      'POST',
      `/api/v1/projects/${project}/runs/${run.body.id}/job-groups`,
      { parent_id: parent },
      201,
    );
    parent = g.body.job_group_id;
    await env.http(
      'POST',
      `/api/v1/projects/${project}/runs/${run.body.id}/job-groups/${parent}/jobs`,
      { jobs: [{ spec, replicas: JOBS_PER_LEVEL }] },
      201,
    );
  }
  const total = JOBS_PER_LEVEL * 6;
  const post = httpPost(env.baseUrl, service.token);
  const workers = Array.from({ length: WORKERS }, (_, i) => new ReferenceWorker(post, `bench-w${i}`));
  const held = await claimAndStartAll(workers);
  const claimed = held.reduce((n, h) => n + h.length, 0);
  log(
    `lifecycle: ${fmtInt(total)} jobs in one run over a depth-5 chain, ${fmtInt(claimed)} claimed by ${WORKERS} ` +
      `workers`,
  );

  const { seconds, statuses } = await timedReports(workers, held, (w, s, k) =>
    w.complete(s.id, k % 10 === 9 ? ERROR : DONE),
  );
  const perSecond = claimed / seconds;
  const errors = [...statuses].filter(([s]) => s !== 200).reduce((n, [, c]) => n + c, 0);
  const metrics = await (await fetch(`${env.baseUrl}/metrics`)).text();
  const retried = [...metrics.matchAll(/^runplane_transaction_retries_total\{[^}]*\} (\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
  const report = await env.http<{ mismatches: unknown[] }>('GET', '/admin/v1/invariants');
  printTable(
    'lifecycle: complete reports over HTTP, 8 concurrent workers, one run, depth-5 groups',
    ['reports', 'seconds', 'reports/s', 'non-200 answers', 'deadlocks retried inside', 'invariant mismatches'],
    [[fmtInt(claimed), seconds.toFixed(2), perSecond.toFixed(0), errors, retried, report.body.mismatches.length]],
    [`answers by status: ${JSON.stringify(Object.fromEntries(statuses))}`],
  );
  return [
    {
      suite: 'lifecycle',
      target: 'complete reports ≥ 500/s (8 workers, depth 5)',
      measured: `${perSecond.toFixed(0)}/s`,
      pass: perSecond >= 500,
    },
    {
      suite: 'lifecycle',
      target: 'deadlock errors surfaced = 0',
      measured: String(errors),
      pass: errors === 0,
      note: `${retried} transient retries absorbed`,
    },
    {
      suite: 'lifecycle',
      target: 'invariant mismatches after = 0',
      measured: String(report.body.mismatches.length),
      pass: report.body.mismatches.length === 0,
    },
  ];
}
