import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { dagTestbed, directWorker, DONE, drain, jobRows } from '../support/dag';
import { jobSpec, makeRun, RunResponse } from '../support/factories';
import { describeRealPostgres, TestApp, TestUser } from '../support/test-app';
import { invariants } from '../support/workers';

describeRealPostgres('always_run and cancellation; parents in cancelled groups', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  dagTestbed('dagcancel', (bed) => ({ t, owner, service, admin, project } = bed));

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const group = async (run: RunResponse, g: number) =>
    (
      await t.http
        .get(`${runUrl(run)}/job-groups/${g}`)
        .set(owner.auth)
        .expect(200)
    ).body;
  const cancel = (run: RunResponse, g: number) =>
    t.http
      .post(`${runUrl(run)}/job-groups/${g}/cancel`)
      .set(owner.auth)
      .send({})
      .expect(200);
  const byName = async (run: RunResponse) => new Map((await jobRows(t, run.id)).map((r) => [r.job_name, r]));

  it('a cancelled group keeps its running always_run job, which finishes and is counted', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 1,
      job_groups: [{ ref: 'g' }],
      jobs: [{ name: 'ar', group_ref: 'g', always_run: true, spec: jobSpec() }],
    });
    const w = directWorker(t, service, 'w-ar');
    const [ar] = await w.claim(1);
    expect(ar.job_name).toBe('ar');
    await t.http
      .post(`${runUrl(run)}/job-groups/1/jobs`)
      .set(owner.auth)
      .send({
        jobs: [
          { name: 'ar-queued', always_run: true, spec: jobSpec() },
          { name: 'work', spec: jobSpec() },
        ],
      })
      .expect(201);
    expect((await w.running(ar.id)).status).toBe(200);
    await cancel(run, 1);
    const hb = await w.heartbeat(ar.id);
    expect(hb.body.cancel_requested).toBe(false);
    const during = await group(run, 1);
    expect(during.status).toBe('cancelled');
    expect(during.state).toBe('running');
    expect(during.counts).toMatchObject({ n_jobs: 3, n_completed: 1, n_cancelled: 1 });
    const jobs = (
      await t.http
        .get(`${runUrl(run)}/job-groups/1/jobs`)
        .set(owner.auth)
        .expect(200)
    ).body.items;
    expect(jobs.map((j: { job_name: string; status: string }) => [j.job_name, j.status])).toEqual([
      ['ar', 'running'],
      ['ar-queued', 'submitted'],
      ['work', 'terminated'],
    ]);
    const counts = (await t.http.get(runUrl(run)).query({ jobs_limit: 0 }).set(owner.auth).expect(200)).body;
    expect(counts.job_counts).toEqual({ running: 1, submitted: 1, terminated: 1 });
    // The queued always_run job is still handed out; the other queued job is ended instead.
    const more = await w.claim(5);
    expect(more.map((s) => s.job_name)).toEqual(['ar-queued']);
    expect((await w.execute(more[0], DONE)).status).toBe(200);
    expect((await w.complete(ar.id, DONE)).status).toBe(200);
    const after = await group(run, 1);
    expect(after.state).toBe('complete');
    expect(after.counts).toEqual({
      n_jobs: 3,
      n_completed: 3,
      n_succeeded: 2,
      n_failed: 0,
      n_cancelled: 1,
      n_pending: 0,
    });
    const rows = await byName(run);
    expect([rows.get('ar')?.status, rows.get('ar-queued')?.status]).toEqual(['done', 'done']);
    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    expect(['done', 'terminated', 'failed']).toContain(view.status);
  });

  it('stop with abort: true stops always_run jobs too', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 2,
      jobs: [{ name: 'ar', always_run: true, spec: jobSpec() }],
    });
    const w = directWorker(t, service, 'w-abort');
    const [ar] = await w.claim(1);
    expect((await w.running(ar.id)).status).toBe(200);
    await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
    const hb = await w.heartbeat(ar.id);
    expect(hb.body.cancel_requested).toBe(true);
    expect((await w.complete(ar.id, { status: 'aborted', termination_reason: 'aborted_by_user' })).status).toBe(200);
    expect((await group(run, 0)).counts).toMatchObject({ n_jobs: 1, n_completed: 1, n_cancelled: 1 });
  });

  it('parents in another group that is cancelled: their children fail, always_run children run', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 3,
      job_groups: [{ ref: 'a' }],
      jobs: [
        { name: 'p', ref: 'p', group_ref: 'a', spec: jobSpec() },
        { name: 'child', ref: 'child', depends_on: ['p'], spec: jobSpec() },
        { name: 'grandchild', depends_on: ['child'], spec: jobSpec() },
        { name: 'cleanup', depends_on: ['p'], always_run: true, spec: jobSpec() },
      ],
    });
    await cancel(run, 1);
    await t.app.get(ServerTransitionsService).sweepCancelled(10, 100);
    const rows = await byName(run);
    expect(
      ['p', 'child', 'grandchild', 'cleanup'].map((n) => [n, rows.get(n)?.status, rows.get(n)?.termination_reason]),
    ).toEqual([
      ['p', 'terminated', 'job_group_cancelled'],
      ['child', 'terminated', 'dependency_failed'],
      ['grandchild', 'terminated', 'dependency_failed'],
      ['cleanup', 'submitted', null],
    ]);
    const ran = await drain(directWorker(t, service, 'w-cleanup'));
    expect(ran.filter((s) => s.run_id === run.id).map((s) => s.job_name)).toEqual(['cleanup']);
    expect((await group(run, 0)).counts).toEqual({
      n_jobs: 4,
      n_completed: 4,
      n_succeeded: 1,
      n_failed: 0,
      n_cancelled: 3,
      n_pending: 0,
    });
  });

  it('job_counts: pending jobs below a cancellation show cancelled, spared always_run ones pending', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 5,
      job_groups: [{ ref: 'a' }],
      jobs: [
        { name: 'p', ref: 'p', spec: jobSpec() },
        { name: 'c1', depends_on: ['p'], group_ref: 'a', spec: jobSpec() },
        { name: 'c2', depends_on: ['p'], group_ref: 'a', always_run: true, spec: jobSpec() },
        { name: 'c3', depends_on: ['p'], spec: jobSpec() },
      ],
    });
    const jobCounts = async () =>
      (await t.http.get(runUrl(run)).query({ jobs_limit: 0 }).set(owner.auth).expect(200)).body.job_counts;
    expect(await jobCounts()).toEqual({ pending: 3, submitted: 1 });
    await cancel(run, 1);
    expect(await jobCounts()).toEqual({ pending: 2, submitted: 1, terminated: 1 });
    const w = directWorker(t, service, 'w-pending-counts');
    const [p] = await w.claim(1);
    expect(p.job_name).toBe('p');
    expect((await w.execute(p, DONE)).status).toBe(200);
    // Released: c1 is queued below the cancellation (still shown cancelled), c2 and c3 queued.
    expect(await jobCounts()).toEqual({ submitted: 2, done: 1, terminated: 1 });
    const ran = await drain(w);
    expect(ran.map((s) => s.job_name).sort()).toEqual(['c2', 'c3']);
    expect(await jobCounts()).toEqual({ done: 3, terminated: 1 });
  });

  it('group views count the pending jobs of their subtree; below a cancellation those show cancelled', async () => {
    // Groups: a (1) > b (2), and c (3). p gates everything; z waits on x1 in another group.
    const run = await makeRun(t, owner, project, {
      priority: 6,
      job_groups: [{ ref: 'a' }, { ref: 'b', parent_ref: 'a' }, { ref: 'c' }],
      jobs: [
        { name: 'p', ref: 'p', spec: jobSpec() },
        { name: 'y', depends_on: ['p'], group_ref: 'a', spec: jobSpec() },
        { name: 'x1', ref: 'x1', depends_on: ['p'], group_ref: 'b', spec: jobSpec() },
        { name: 'x2', depends_on: ['p'], group_ref: 'b', always_run: true, spec: jobSpec() },
        { name: 'z', depends_on: ['x1'], group_ref: 'c', spec: jobSpec() },
        { name: 'q', group_ref: 'c', spec: jobSpec() },
      ],
    });
    const pending = async () => {
      const out: number[] = [];
      for (const g of [0, 1, 2, 3]) out.push((await group(run, g)).counts.n_pending);
      const children = await t.http
        .get(`${runUrl(run)}/job-groups/0/job-groups`)
        .set(owner.auth)
        .expect(200);
      // A page of children shows the same counts as each group's own view.
      expect(children.body.items.map((g: { counts: { n_pending: number } }) => g.counts.n_pending)).toEqual([
        out[1],
        out[3],
      ]);
      const jobCounts = (await t.http.get(runUrl(run)).query({ jobs_limit: 0 }).set(owner.auth).expect(200)).body
        .job_counts;
      expect(jobCounts.pending ?? 0).toBe(out[0]);
      return out;
    };
    expect(await pending()).toEqual([4, 3, 2, 1]);
    await cancel(run, 2);
    // b's x1 shows cancelled; x2 (always_run) still waits: in b, in a (with y) and in the run (with z).
    expect(await pending()).toEqual([3, 2, 1, 1]);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
    const w = directWorker(t, service, 'w-group-pending');
    const first = await w.claim(2);
    expect(first.map((s) => s.job_name).sort()).toEqual(['p', 'q']);
    for (const s of first) expect((await w.execute(s, DONE)).status).toBe(200);
    // p released y, x1 and x2; z still waits for x1.
    expect(await pending()).toEqual([1, 0, 0, 1]);
    const ran = await drain(w);
    expect(ran.map((s) => s.job_name).sort()).toEqual(['x2', 'y']);
    await t.app.get(ServerTransitionsService).sweepCancelled(10, 100);
    // x1 ended with b's cancellation, so z ended with it: nothing waits any more.
    const rows = await byName(run);
    expect([rows.get('x1')?.status, rows.get('z')?.status, rows.get('z')?.termination_reason]).toEqual([
      'terminated',
      'terminated',
      'dependency_failed',
    ]);
    expect(await pending()).toEqual([0, 0, 0, 0]);
    expect((await group(run, 3)).counts).toEqual({
      n_jobs: 2,
      n_completed: 2,
      n_succeeded: 1,
      n_failed: 0,
      n_cancelled: 1,
      n_pending: 0,
    });
  });

  it('a claim ending a queued parent below a cancellation releases its children in its transaction', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 4,
      job_groups: [{ ref: 'a' }],
      jobs: [
        { name: 'p', ref: 'p', group_ref: 'a', spec: jobSpec() },
        { name: 'after', depends_on: ['p'], always_run: true, spec: jobSpec() },
      ],
    });
    await cancel(run, 1);
    // No sweep: the claim meets p first, ends it, and the always_run child becomes claimable.
    const ran = await drain(directWorker(t, service, 'w-claim-cascade'));
    expect(ran.filter((s) => s.run_id === run.id).map((s) => s.job_name)).toEqual(['after']);
    const rows = await byName(run);
    expect([rows.get('p')?.status, rows.get('after')?.status]).toEqual(['terminated', 'done']);
  });

  it('an abort above an earlier cancellation stops the always_run job that one spared, as aborted', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 5,
      job_groups: [{ ref: 'g' }],
      jobs: [
        { name: 'ar', group_ref: 'g', always_run: true, spec: jobSpec() },
        { name: 'other', spec: jobSpec() },
      ],
    });
    const w = directWorker(t, service, 'w-mixed');
    const got = await w.claim(2);
    const ar = got.find((s) => s.job_name === 'ar');
    if (!ar) throw new Error('ar not claimed');
    expect((await w.running(ar.id)).status).toBe(200);
    await cancel(run, 1);
    expect((await w.heartbeat(ar.id)).body.cancel_requested).toBe(false);
    await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
    const batch = await t.http
      .post('/internal/v1/workers/w-mixed/heartbeat')
      .set(service.auth)
      .send({ submissions: [ar.id] })
      .expect(200);
    expect(batch.body.submissions[0]).toMatchObject({ cancel_requested: true, status: 'aborted' });
    const jobs = (
      await t.http
        .get(`${runUrl(run)}/job-groups/1/jobs`)
        .set(owner.auth)
        .expect(200)
    ).body.items;
    expect(jobs.map((j: { status: string }) => j.status)).toEqual(['aborted']);
    expect((await group(run, 1)).counts).toMatchObject({ n_jobs: 1, n_completed: 1, n_cancelled: 1 });
    expect((await w.complete(ar.id, { status: 'aborted', termination_reason: 'aborted_by_user' })).status).toBe(200);
    for (const s of got.filter((x) => x !== ar))
      await w.complete(s.id, { status: 'aborted', termination_reason: 'aborted_by_user' });
  });

  it('a claim meeting a queued always_run job an earlier cancellation spared and an abort stops: aborted', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 7,
      job_groups: [{ ref: 'g' }],
      jobs: [{ name: 'ar', group_ref: 'g', always_run: true, spec: jobSpec() }],
    });
    await cancel(run, 1);
    await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
    // No sweep ran: the claim meets the job first and ends it as the sweep of the abort would.
    expect(await directWorker(t, service, 'w-claim-abort').claim(1)).toEqual([]);
    expect((await byName(run)).get('ar')).toMatchObject({ status: 'aborted', termination_reason: 'aborted_by_user' });
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('an abort of a group below the root, over an open always_run job: counters and invariants agree', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 6,
      job_groups: [{ ref: 'top' }, { ref: 'low', parent_ref: 'top' }],
      jobs: [
        { name: 'ar-low', group_ref: 'low', always_run: true, spec: jobSpec() },
        { name: 'ar-top', group_ref: 'top', always_run: true, spec: jobSpec() },
      ],
    });
    const w = directWorker(t, service, 'w-nested-abort');
    const got = await w.claim(2);
    expect(got.map((s) => s.job_name).sort()).toEqual(['ar-low', 'ar-top']);
    for (const s of got) expect((await w.running(s.id)).status).toBe(200);
    await t.http
      .post(`${runUrl(run)}/job-groups/2/cancel`)
      .set(owner.auth)
      .send({ reason: 'aborted_by_user' })
      .expect(200);
    // The abort counted its own always_run job on its group and every level above; the other one stays open.
    expect((await invariants(t, admin)).mismatches).toEqual([]);
    expect((await group(run, 1)).counts).toMatchObject({ n_jobs: 2, n_completed: 1, n_cancelled: 1 });
    for (const s of got)
      await w.complete(
        s.id,
        s.job_name === 'ar-low' ? { status: 'aborted', termination_reason: 'aborted_by_user' } : DONE,
      );
    expect((await group(run, 1)).counts).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 1, n_cancelled: 1 });
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
});
