import { randomUUID } from 'node:crypto';
import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { DONE, ERROR, NO_CAPACITY } from '../../bench/reference-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeGroupChain, makeProject, makeRun, RunResponse } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';

describe('worker lifecycle: claim, run, complete, retries, cancellation, fail-fast, leases', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'lifecycle' });
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterEach(async () => {
    const report = await invariants(t, admin);
    expect(report.mismatches).toEqual([]);
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const getRun = async (run: RunResponse) =>
    (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body as RunResponse;
  const group = async (run: RunResponse, g: number) =>
    (
      await t.http
        .get(`${runUrl(run)}/job-groups/${g}`)
        .set(owner.auth)
        .expect(200)
    ).body;
  /** Claims until it gets the submissions of this run (other tests' queued work may come first). */
  const claimOf = (w: ReturnType<typeof makeWorker>, run: RunResponse, n = 1) => claimFor(w, run.id, n);

  it('refuses user tokens on the internal API and admin routes to non-admins', async () => {
    await t.http
      .post('/internal/v1/submissions/claim')
      .set(owner.auth)
      .send({ worker_id: 'w', capacity: { cpu: 1, memory_mib: 1 } })
      .expect(403);
    await t.http.get('/admin/v1/invariants').set(owner.auth).expect(403);
    await t.http.get('/admin/v1/invariants').set(service.auth).expect(403);
    await t.http
      .post('/internal/v1/submissions/claim')
      .set(service.auth)
      .send({ worker_id: 'bad id!', capacity: { cpu: 1, memory_mib: 1 } })
      .expect(400);
    await t.http
      .post('/internal/v1/submissions/claim')
      .set(service.auth)
      .send({ worker_id: 'w', capacity: { cpu: 1 } })
      .expect(400);
    await t.http
      .post('/internal/v1/submissions/not-a-uuid/complete')
      .set(service.auth)
      .send({ worker_id: 'w', status: 'done', termination_reason: 'done_by_runner' })
      .expect(404);
  });

  it('runs a job to done: statuses, counters, run status, idempotent and stale reports', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }, { spec: jobSpec() }] });
    const w = makeWorker(t, service, 'w-done');
    const [a, b] = await claimOf(w, run, 2);
    expect((await getRun(run)).status).toBe('provisioning');
    expect((await w.running(a.id)).status).toBe(200);
    expect((await getRun(run)).status).toBe('running');
    const hb = await w.heartbeat(a.id);
    expect(hb.body.cancel_requested).toBe(false);
    const first = await w.complete(a.id, DONE);
    expect(first.status).toBe(200);
    const again = await w.complete(a.id, DONE);
    expect(again.body).toEqual(first.body);
    expect((await w.complete(a.id, ERROR)).status).toBe(409);
    expect((await makeWorker(t, service, 'intruder').complete(b.id, DONE)).status).toBe(409);
    expect((await makeWorker(t, service, 'w-done').complete(randomUUID(), DONE)).status).toBe(404);
    expect((await w.heartbeat(a.id)).status).toBe(409);
    // The refused reports changed nothing: b is still the claimer's, provisioning.
    const [row] = await t.dataSource.query(`SELECT status, worker_id, finished_at FROM job_submissions WHERE id = $1`, [
      b.id,
    ]);
    expect(row).toEqual({ status: 'provisioning', worker_id: 'w-done', finished_at: null });
    expect(await group(run, 0)).toMatchObject({
      counts: { n_jobs: 2, n_completed: 1, n_succeeded: 1 },
      status: 'running',
    });
    await w.execute(b, DONE);
    const done = await getRun(run);
    expect(done).toMatchObject({ status: 'done', termination_reason: 'all_jobs_done' });
    expect(done.finished_at).toEqual(expect.any(String));
    expect(await group(run, 0)).toMatchObject({ state: 'complete', status: 'success' });
  });

  it('counts a worker-reported abort as cancelled, idempotently, and finishes the run', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const w = makeWorker(t, service, 'w-abort');
    const [s] = await claimOf(w, run);
    expect((await w.running(s.id)).status).toBe(200);
    const aborted = { status: 'aborted', termination_reason: 'aborted_by_user' } as const;
    const first = await w.complete(s.id, aborted);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({
      status: 'aborted',
      termination_reason: 'aborted_by_user',
      retry_submission: null,
    });
    expect((await w.complete(s.id, aborted)).body).toEqual(first.body);
    expect((await w.complete(s.id, DONE)).status).toBe(409);
    expect(await group(run, 0)).toMatchObject({
      counts: { n_jobs: 1, n_completed: 1, n_cancelled: 1, n_succeeded: 0, n_failed: 0 },
      state: 'complete',
    });
    const after = await getRun(run);
    expect(after.jobs[0]).toMatchObject({ status: 'aborted', termination_reason: 'aborted_by_user' });
    expect(after.finished_at).toEqual(expect.any(String));
  });

  it("keeps a worker's provisioning and runtime data as sent, key order included, in run and list", async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const w = makeWorker(t, service, 'w-data');
    const [s] = await claimOf(w, run);
    const provisioning = { zone: 'b', instance: { type: 'p4d', gpus: [8, 'A100'] }, price: 32.77, a: null };
    const runtime = { ports: { web: 8080 }, z: true, b: 'ü\n"' };
    expect((await w.running(s.id, provisioning)).status).toBe(200);
    await t.http
      .post(`/internal/v1/submissions/${s.id}/heartbeat`)
      .set(service.auth)
      .send({ worker_id: 'w-data', runtime_data: runtime })
      .expect(200);
    const single = (await getRun(run)).jobs[0].job_submissions[0];
    const page = (
      await t.http.get(`/api/v1/projects/${project}/runs?limit=100&job_submissions_limit=1`).set(owner.auth).expect(200)
    ).body as { items: RunResponse[] };
    const listed = required(
      page.items.find((r) => r.id === run.id),
      'the run in the list',
    ).jobs[0].job_submissions[0];
    for (const sub of [single, listed] as unknown as { provisioning_data: unknown; runtime_data: unknown }[]) {
      expect(JSON.stringify(sub.provisioning_data)).toBe(JSON.stringify(provisioning));
      expect(JSON.stringify(sub.runtime_data)).toBe(JSON.stringify(runtime));
    }
  });

  // Stale reports about the old submission are refused.
  it('retries within the policy: a new submission in the same transaction, pending/retrying', async () => {
    const run = await makeRun(t, owner, project, { retry: { on_events: ['error'], max_attempts: 3 } });
    const w = makeWorker(t, service, 'w-retry');
    const [s0] = await claimOf(w, run);
    const r0 = await w.execute(s0, ERROR);
    expect(r0.body.retry_submission).toMatchObject({ submission_num: 1 });
    // One transaction wrote the failure, the retry and the job's facts: the rows carry one transaction id (xmin).
    const written = await t.dataSource.query(
      `SELECT 'failed' AS what, xmin::text FROM job_submissions WHERE id = $1
       UNION ALL SELECT 'retry', xmin::text FROM job_submissions WHERE job_id = $2 AND submission_num = 1
       UNION ALL SELECT 'job', xmin::text FROM jobs WHERE id = $2`,
      [s0.id, s0.job_id],
    );
    expect(written).toEqual(['failed', 'retry', 'job'].map((what) => ({ what, xmin: written[0].xmin })));
    const pending = await getRun(run);
    expect(pending).toMatchObject({ status: 'pending', status_message: 'retrying' });
    expect(pending.jobs[0]).toMatchObject({
      status: 'submitted',
      submission_count: 2,
      termination_reason: 'container_exited_with_error',
    });
    expect((await w.complete(s0.id, DONE)).status).toBe(409);
    expect((await getRun(run)).jobs[0]).toMatchObject({ status: 'submitted', submission_count: 2 });
    const [s1] = await claimOf(w, run);
    expect(s1.submission_num).toBe(1);
    await w.execute(s1, ERROR);
    const [s2] = await claimOf(w, run);
    const last = await w.execute(s2, ERROR);
    expect(last.body.retry_submission).toBeNull();
    const failed = await getRun(run);
    expect(failed).toMatchObject({ status: 'failed', termination_reason: 'job_failed' });
    expect(failed.jobs[0].job_submissions.map((s) => [s.submission_num, s.status])).toEqual([
      [0, 'failed'],
      [1, 'failed'],
      [2, 'failed'],
    ]);
  });

  it('folds superseded no-capacity attempts away, keeping the direct predecessor, and counts them', async () => {
    const run = await makeRun(t, owner, project, { retry: { on_events: ['no_capacity'] } });
    const w = makeWorker(t, service, 'w-nocap');
    for (let i = 0; i < 6; i++) {
      const [s] = await claimOf(w, run);
      expect(s.submission_num).toBe(i);
      await w.execute(s, NO_CAPACITY);
    }
    const [s6] = await claimOf(w, run);
    await w.execute(s6, DONE);
    const job = (await getRun(run)).jobs[0] as RunResponse['jobs'][0] & { folded_submissions: Record<string, number> };
    expect(job.job_submissions.map((s) => s.submission_num)).toEqual([5, 6]);
    expect(job.folded_submissions).toEqual({ failed_to_start_due_to_no_capacity: 5 });
    expect(job.submission_count).toBe(7);
    expect(job.status).toBe('done');
  });

  it('cancel reaches workers through heartbeats; queued work is terminated without a worker', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'g' }],
      jobs: [{ group_ref: 'g', spec: jobSpec(), replicas: 3 }],
    });
    const w = makeWorker(t, service, 'w-cancel');
    const [s] = await claimOf(w, run);
    await w.running(s.id);
    await t.http
      .post(`${runUrl(run)}/job-groups/1/cancel`)
      .set(owner.auth)
      .send({})
      .expect(200);
    expect((await w.heartbeat(s.id)).body.cancel_requested).toBe(true);
    expect((await getRun(run)).status).toBe('terminating');
    const swept = await t.app.get(ServerTransitionsService).sweepCancelled(100, 1000);
    expect(swept).toBeGreaterThanOrEqual(2);
    await w.complete(s.id, { status: 'terminated', termination_reason: 'job_group_cancelled' });
    const after = await getRun(run);
    expect(after.status).toBe('terminated');
    for (const j of after.jobs)
      expect(j).toMatchObject({
        status: 'terminated',
        termination_reason: 'job_group_cancelled',
        cancelled_job_group_id: 1,
      });
    expect(await group(run, 0)).toMatchObject({ counts: { n_jobs: 3, n_cancelled: 3, n_completed: 3 } });
    expect(await claimOf(w, run)).toEqual([]);
  });

  it('fail-fast cancels the group once its failures reach cancel_after_n_failures, in that transaction', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'ff', cancel_after_n_failures: 2 }],
      jobs: [{ group_ref: 'ff', spec: jobSpec(), replicas: 5 }, { spec: jobSpec() }],
    });
    const w = makeWorker(t, service, 'w-ff');
    const claimed = await claimOf(w, run, 6);
    const inGroup = claimed.filter((c) => c.job_group_id === 1);
    await w.execute(inGroup[0], ERROR);
    expect((await group(run, 1)).status).toBe('failure');
    await w.execute(inGroup[1], ERROR);
    // The second failure and the cancellation it caused were written by one transaction (one xmin): it locked every
    // counter row of the group (the failure count read whole) and flagged them all.
    const written = await t.dataSource.query(
      `SELECT 'failure' AS what, xmin::text FROM job_submissions WHERE id = $1
       UNION ALL SELECT 'cancellation', xmin::text FROM job_groups_cancelled WHERE run_id = $2 AND job_group_id = 1
       UNION ALL SELECT DISTINCT 'counters', xmin::text FROM job_group_counters WHERE run_id = $2 AND job_group_id = 1`,
      [inGroup[1].id, run.id],
    );
    expect(written).toEqual(['failure', 'cancellation', 'counters'].map((what) => ({ what, xmin: written[0].xmin })));
    const g = await group(run, 1);
    expect(g).toMatchObject({
      status: 'failure',
      cancellation: { job_group_id: 1, cancelled_by: 'system', reason: 'fail_fast' },
    });
    expect(g.counts).toEqual({ n_jobs: 5, n_completed: 5, n_succeeded: 0, n_failed: 2, n_cancelled: 3, n_pending: 0 });
    expect((await w.heartbeat(inGroup[2].id)).body.cancel_requested).toBe(true);
    for (const c of inGroup.slice(2)) await w.complete(c.id, { status: 'terminated', termination_reason: 'fail_fast' });
    const other = required(
      claimed.find((c) => c.job_group_id === 0),
      'a claimed job of group 0',
    );
    await w.execute(other, DONE);
    expect(await group(run, 0)).toMatchObject({ counts: { n_jobs: 6, n_succeeded: 1, n_failed: 2, n_cancelled: 3 } });
    expect((await getRun(run)).status).toBe('failed');
  });

  it('a lapsed lease counts as instance_unreachable and retries on interruption', async () => {
    const run = await makeRun(t, owner, project, { retry: { on_events: ['interruption'] } });
    const w = makeWorker(t, service, 'w-lapse');
    const [s] = await claimOf(w, run);
    await w.running(s.id);
    await t.dataSource.query(
      `UPDATE job_submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [s.id],
    );
    expect(await t.app.get(ServerTransitionsService).expireLapsedLeases(100)).toBeGreaterThanOrEqual(1);
    const job = (await getRun(run)).jobs[0];
    expect(job.job_submissions.map((x) => [x.submission_num, x.status])).toEqual([
      [0, 'failed'],
      [1, 'submitted'],
    ]);
    expect((await w.complete(s.id, DONE)).status).toBe(409);
    const [s1] = await claimOf(w, run);
    await w.execute(s1, DONE);
    expect((await getRun(run)).status).toBe('done');
  });

  it('stopping a running run: terminating until the worker reports, then terminated', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 2 }] });
    const w = makeWorker(t, service, 'w-stop');
    const [s] = await claimOf(w, run);
    await w.running(s.id);
    const stopping = (
      await t.http
        .post(`${runUrl(run)}/stop`)
        .set(owner.auth)
        .send({})
        .expect(200)
    ).body;
    expect(stopping).toMatchObject({ status: 'terminating', status_message: 'stopping' });
    expect((await w.heartbeat(s.id)).body.cancel_requested).toBe(true);
    await w.complete(s.id, { status: 'terminated', termination_reason: 'stopped_by_user' });
    await t.app.get(ServerTransitionsService).sweepCancelled(100, 1000);
    expect(await getRun(run)).toMatchObject({ status: 'terminated', termination_reason: 'stopped_by_user' });
  });

  it('adding jobs re-opens a complete group and the run', async () => {
    const run = await makeRun(t, owner, project);
    const w = makeWorker(t, service, 'w-reopen');
    const [s] = await claimOf(w, run);
    await w.execute(s, DONE);
    expect((await getRun(run)).status).toBe('done');
    expect((await group(run, 0)).state).toBe('complete');
    const [g] = await makeGroupChain(t, owner, project, run.id, 1);
    await t.http
      .post(`${runUrl(run)}/job-groups/${g}/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(201);
    expect((await group(run, 0)).state).toBe('running');
    expect((await getRun(run)).status).toBe('submitted');
  });
});
