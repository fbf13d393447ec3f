import { ERROR } from '../../bench/reference-worker';
import { dagTestbed, directWorker, drainFast, jobRows, statusCounts } from '../support/dag';
import { jobSpec, makeRun } from '../support/factories';
import { describeRealPostgres, TestApp, TestUser } from '../support/test-app';

const spec = jobSpec({ resources: { cpu: 0.001, memory_mib: 1 } });

describeRealPostgres('dependencies at scale: fan-out and fan-in of 10,000', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  dagTestbed('dagscale', (bed) => ({ t, owner, service, project } = bed));

  const addJobs = (runId: string, jobs: unknown[]) =>
    t.http.post(`/api/v1/projects/${project}/runs/${runId}/job-groups/0/jobs`).set(owner.auth).send({ jobs });
  const events = async (runId: string, status: string) =>
    (
      await t.dataSource.query(
        `SELECT count(*)::int AS n FROM events WHERE run_id = $1 AND type = 'job.status' AND status = $2`,
        [runId, status],
      )
    )[0].n;

  it.each([
    ['done', 'release', { submitted: 10_000 }],
    ['failed', 'cascade', { 'terminated/dependency_failed': 10_000 }],
  ] as const)(
    'fan-out: a parent that ends %s (%s) settles 10,000 children in its transaction',
    async (how, _, want) => {
      // Each test's run outranks the work earlier tests left queued, so its claims get its own jobs.
      const run = await makeRun(t, owner, project, { priority: how === 'done' ? 1 : 2, jobs: [{ name: 'p', spec }] });
      const p = run.jobs[0].id;
      // Two generations below p: 9,000 children and 1,000 grandchildren (the cascade is transitive).
      const res = await addJobs(run.id, [
        { name: 'c', ref: 'c', replicas: 9_000, depends_on: [p], spec },
        ...Array.from({ length: 1_000 }, (_, i) => ({ name: `g${i}`, depends_on: [p], spec })),
      ]);
      expect(res.status).toBe(201);
      expect(await statusCounts(t, run.id)).toEqual({ submitted: 1, pending: 10_000 });
      const w = directWorker(t, service, `w-fan-out-${how}`);
      const [s] = await w.claim(1);
      expect((await w.running(s.id)).status).toBe(200);
      expect(
        (await w.complete(s.id, how === 'done' ? { status: 'done', termination_reason: 'done_by_runner' } : ERROR))
          .status,
      ).toBe(200);
      const counts = await statusCounts(t, run.id);
      delete counts['done/done_by_runner'];
      delete counts['failed/container_exited_with_error'];
      expect(counts).toEqual(want);
      expect(await events(run.id, how === 'done' ? 'submitted' : 'terminated')).toBe(10_000);
      const root = (await t.http.get(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0`).set(owner.auth)).body;
      expect(root.counts.n_completed).toBe(how === 'done' ? 1 : 10_001);
    },
  );

  it('fan-in: 10,000 parents finishing concurrently release their one descendant once, through joins', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 3,
      jobs: Array.from({ length: 10 }, (_, i) => ({ name: `p${i}`, replicas: 1_000, spec })),
    });
    const rows = await jobRows(t, run.id);
    const res = await addJobs(run.id, [
      ...Array.from({ length: 10 }, (_, i) => ({
        name: `join${i}`,
        ref: `join${i}`,
        depends_on: rows.filter((r) => r.job_name === `p${i}`).map((r) => r.id),
        spec,
      })),
      { name: 'final', depends_on: Array.from({ length: 10 }, (_, i) => `join${i}`), spec },
    ]);
    expect(res.status).toBe(201);
    const w = directWorker(t, service, 'w-fan-in');
    const ran = (await drainFast(w, 8, run.id)).filter((s) => s.run_id === run.id);
    expect(ran).toHaveLength(10_011);
    expect(ran.slice(-1).map((s) => s.job_name)).toEqual(['final']);
    expect(new Set(ran.slice(10_000, 10_010).map((s) => s.job_name)).size).toBe(10);
    expect(await statusCounts(t, run.id)).toEqual({ 'done/done_by_runner': 10_011 });
    const view = (await t.http.get(`/api/v1/projects/${project}/runs/${run.id}`).set(owner.auth)).body;
    expect(view.status).toBe('done');
  }, 600_000);
});
