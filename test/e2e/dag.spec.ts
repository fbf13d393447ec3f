import { ERROR } from '../../bench/reference-worker';
import { dagTestbed, Claimed, directWorker, DONE, drain, failing, jobRows, statusCounts } from '../support/dag';
import { jobSpec, makeRun, RunResponse } from '../support/factories';
import { describeRealPostgres, TestApp, TestUser } from '../support/test-app';

const job = (ref: string, depends_on: string[] = [], extra: Record<string, unknown> = {}) => ({
  name: ref,
  ref,
  depends_on,
  spec: jobSpec(),
  ...extra,
});

describeRealPostgres('dependencies between jobs: release, cascade, views, add-jobs', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  dagTestbed('dag', (bed) => ({ t, owner, service, project } = bed));

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const getRun = async (run: RunResponse) =>
    (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body as RunResponse & { jobs: JobView[] };
  type JobView = RunResponse['jobs'][number] & { depends_on: string[]; n_pending_parents: number; job_name: string };
  const byName = (jobs: JobView[]) => new Map(jobs.map((j) => [j.job_name, j]));
  const names = (claimed: Claimed[]) => claimed.map((c) => c.job_name ?? '');

  it('a diamond runs in order: a, then b and c, then d; views show depends_on and pending counts', async () => {
    const run = await makeRun(t, owner, project, {
      jobs: [job('d', ['b', 'c']), job('b', ['a']), job('c', ['a']), job('a')],
    });
    const jobs = byName((await getRun(run)).jobs as JobView[]);
    expect([...jobs.values()].map((j) => [j.job_name, j.status, j.n_pending_parents])).toEqual([
      ['d', 'pending', 2],
      ['b', 'pending', 1],
      ['c', 'pending', 1],
      ['a', 'submitted', 0],
    ]);
    expect([...(jobs.get('d')?.depends_on ?? [])].sort()).toEqual([jobs.get('b')?.id, jobs.get('c')?.id].sort());
    const jobCounts = async () =>
      (await t.http.get(runUrl(run)).query({ jobs_limit: 0 }).set(owner.auth).expect(200)).body.job_counts;
    // Jobs waiting for parents are counted as pending, apart from the queued ones, as each wave releases the next.
    const counts = [await jobCounts()];
    const w = directWorker(t, service, 'w-diamond');
    const waves: string[][] = [];
    for (;;) {
      const got = await w.claim(10);
      if (got.length === 0) break;
      waves.push(names(got).sort());
      for (const s of got) expect((await w.execute(s, DONE)).status).toBe(200);
      counts.push(await jobCounts());
    }
    expect(waves).toEqual([['a'], ['b', 'c'], ['d']]);
    expect(counts).toEqual([
      { pending: 3, submitted: 1 },
      { pending: 1, submitted: 2, done: 1 },
      { submitted: 1, done: 3 },
      { done: 4 },
    ]);
    const after = await getRun(run);
    expect(after.status).toBe('done');
    const dependents = await t.http
      .get(`${runUrl(run)}/jobs/${jobs.get('a')?.id}/dependents?limit=1`)
      .set(owner.auth)
      .expect(200);
    expect(dependents.body.items).toHaveLength(1);
    const rest = await t.http
      .get(`${runUrl(run)}/jobs/${jobs.get('a')?.id}/dependents?limit=5&cursor=${dependents.body.next_cursor}`)
      .set(owner.auth)
      .expect(200);
    expect([...dependents.body.items, ...rest.body.items].map((j: JobView) => j.job_name).sort()).toEqual(['b', 'c']);
    expect(rest.body.next_cursor).toBeNull();
    await t.http
      .get(`${runUrl(run)}/jobs/${jobs.get('a')?.id}/dependents?cursor=xyz`)
      .set(owner.auth)
      .expect(400);
    await t.http
      .get(`${runUrl(run)}/jobs/00000000-0000-4000-8000-000000000000/dependents`)
      .set(owner.auth)
      .expect(404);
  });

  it('a chain of 1,000 jobs runs one at a time, in order', async () => {
    const jobs = Array.from({ length: 1000 }, (_, i) => job(`c${i}`, i === 0 ? [] : [`c${i - 1}`]));
    const run = await makeRun(t, owner, project, { jobs });
    expect(await statusCounts(t, run.id)).toEqual({ submitted: 1, pending: 999 });
    const w = directWorker(t, service, 'w-chain');
    const order: string[] = [];
    for (;;) {
      const got = await w.claim(5);
      if (got.length === 0) break;
      expect(got).toHaveLength(1);
      order.push(got[0].job_name ?? '');
      expect((await w.execute(got[0], DONE)).status).toBe(200);
    }
    expect(order).toEqual(jobs.map((j) => j.name));
    expect(await statusCounts(t, run.id)).toEqual({ 'done/done_by_runner': 1000 });
    expect((await getRun(run)).status).toBe('done');
    // 3,000 requests one after another: about 20 s directly, over 60 s through CI's transaction-pooling PgBouncer.
  }, 240_000);

  it('a failed parent ends its normal descendants (transitively) and lets always_run ones run', async () => {
    // p fails; n1 <- p, n2 <- n1 (ended transitively); a1 (always_run) <- p runs; n3 <- a1 runs when a1 succeeds;
    // a2 (always_run) <- n1 runs though n1 never ran; other <- q succeeds independently.
    const run = await makeRun(t, owner, project, {
      jobs: [
        job('p'),
        job('q'),
        job('n1', ['p']),
        job('n2', ['n1']),
        job('a1', ['p'], { always_run: true }),
        job('n3', ['a1']),
        job('a2', ['n1'], { always_run: true }),
        job('other', ['q']),
      ],
    });
    const w = directWorker(t, service, 'w-fail');
    const ran = await drain(w, failing(['p'], ERROR));
    expect(names(ran).sort()).toEqual(['a1', 'a2', 'n3', 'other', 'p', 'q']);
    const rows = new Map((await jobRows(t, run.id)).map((r) => [r.job_name, r]));
    expect(['n1', 'n2'].map((n) => [rows.get(n)?.status, rows.get(n)?.termination_reason])).toEqual([
      ['terminated', 'dependency_failed'],
      ['terminated', 'dependency_failed'],
    ]);
    const view = await getRun(run);
    expect(view.status).toBe('failed');
    const root = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(root.counts).toEqual({
      n_jobs: 8,
      n_completed: 8,
      n_succeeded: 5,
      n_failed: 1,
      n_cancelled: 2,
      n_pending: 0,
    });
    const events = await t.dataSource.query(
      `SELECT count(*)::int AS n FROM events WHERE run_id = $1 AND reason = 'dependency_failed'`,
      [run.id],
    );
    expect(events[0].n).toBe(2);
  });

  it('a retried parent releases its children once, on its final outcome', async () => {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['error'], max_attempts: 3 },
      jobs: [job('p'), job('c', ['p'])],
    });
    const w = directWorker(t, service, 'w-retry');
    let attempts = 0;
    const ran = await drain(w, (s) => (s.job_name === 'p' && attempts++ < 2 ? ERROR : DONE));
    expect(names(ran)).toEqual(['p', 'p', 'p', 'c']);
    expect((await getRun(run)).status).toBe('done');
  });

  it('add-jobs may depend on finished, running and failed parents of earlier requests', async () => {
    const run = await makeRun(t, owner, project, { jobs: [job('ok'), job('bad'), job('slow')] });
    const w = directWorker(t, service, 'w-add');
    const got = await w.claim(3);
    const by = new Map(got.map((s) => [s.job_name, s]));
    const claimed = (n: string) => {
      const s = by.get(n);
      if (!s) throw new Error(`${n} not claimed`);
      return s;
    };
    await w.execute(claimed('ok'), DONE);
    await w.execute(claimed('bad'), ERROR);
    expect((await w.running(claimed('slow').id)).status).toBe(200);
    const ids = new Map((await jobRows(t, run.id)).map((r) => [r.job_name, r.id]));
    const add = await t.http
      .post(`${runUrl(run)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({
        jobs: [
          job('after-ok', [ids.get('ok') as string]),
          job('after-bad', [ids.get('bad') as string]),
          job('after-bad-always', [ids.get('bad') as string], { always_run: true }),
          job('after-slow', [ids.get('slow') as string]),
          job('after-after-bad', ['after-bad']),
          job('after-all', ['after-ok', 'after-slow']),
        ],
      })
      .expect(201);
    const added = byName(add.body.jobs as JobView[]);
    expect([...added.values()].map((j) => [j.job_name, j.status, j.termination_reason, j.n_pending_parents])).toEqual([
      ['after-ok', 'submitted', null, 0],
      ['after-bad', 'terminated', 'dependency_failed', 0],
      ['after-bad-always', 'submitted', null, 0],
      ['after-slow', 'pending', null, 1],
      ['after-after-bad', 'terminated', 'dependency_failed', 0],
      ['after-all', 'pending', null, 2],
    ]);
    expect((await w.complete(claimed('slow').id, DONE)).status).toBe(200);
    const ran = await drain(w);
    expect(names(ran).sort()).toEqual(['after-all', 'after-bad-always', 'after-ok', 'after-slow']);
    const view = await getRun(run);
    expect(view.status).toBe('failed');
    const root = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(root.counts).toEqual({
      n_jobs: 9,
      n_completed: 9,
      n_succeeded: 6,
      n_failed: 1,
      n_cancelled: 2,
      n_pending: 0,
    });
  });

  it('replicas: a ref stands for every replica of its entry', async () => {
    const run = await makeRun(t, owner, project, {
      jobs: [job('fan', [], { replicas: 3 }), job('join', ['fan'], { replicas: 2 })],
    });
    const rows = await jobRows(t, run.id);
    expect(rows.map((r) => [r.job_name, r.status, r.n_pending_parents])).toEqual([
      ['fan', 'submitted', 0],
      ['fan', 'submitted', 0],
      ['fan', 'submitted', 0],
      ['join', 'pending', 3],
      ['join', 'pending', 3],
    ]);
    const w = directWorker(t, service, 'w-replicas');
    expect(names(await drain(w))).toEqual(['fan', 'fan', 'fan', 'join', 'join']);
  });
});
