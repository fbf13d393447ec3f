import { randomUUID } from 'node:crypto';
import { required } from '../../src/common/required';
import { DONE, ReferenceWorker } from '../../bench/reference-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';

/**
 * The internal API the runplane worker needs beyond the single reports: one batched heartbeat per worker, claims that
 * respect a worker's container runtime (or its absence), the run's name in each claimed submission, and the
 * measurements a worker sends with its final report.
 */
describe('worker API: batched heartbeats, container capability, run names, runtime data', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let other: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'heartbeats' });
    owner = await t.user();
    service = await t.user('service');
    other = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const batch = (account: TestUser, workerId: string, submissions: unknown) =>
    t.http.post(`/internal/v1/workers/${workerId}/heartbeat`).set(account.auth).send({ submissions });
  const leaseRows = async (ids: string[]) =>
    new Map(
      (
        await t.dataSource.query<{ id: string; lease: Date | null; rolled: Date | null }[]>(
          `SELECT s.id, s.lease_expires_at AS lease, b.rolled_up_to AS rolled
             FROM job_submissions s LEFT JOIN billing_attempts b ON b.submission_id = s.id
            WHERE s.id = ANY($1)`,
          [ids],
        )
      ).map((r) => [r.id, r]),
    );
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it('renews every held lease and accrues usage in one call; anything not held is answered held: false', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 500,
      jobs: [{ spec: jobSpec() }, { spec: jobSpec() }, { spec: jobSpec() }],
    });
    const w = makeWorker(t, service, 'w-batch');
    const [a, b, c] = await claimFor(w, run.id, 3);
    for (const s of [a, b]) expect((await w.running(s.id)).status).toBe(200);
    await w.complete(c.id, { status: 'failed', termination_reason: 'executor_error' });
    // Another account's submission, and one of the same account held by another worker id.
    const foreignRun = await makeRun(t, owner, project, { priority: 500, jobs: [{ spec: jobSpec() }] });
    const [foreign] = await claimFor(makeWorker(t, other, 'w-batch'), foreignRun.id);
    const siblingRun = await makeRun(t, owner, project, { priority: 500, jobs: [{ spec: jobSpec() }] });
    const [sibling] = await claimFor(makeWorker(t, service, 'w-sibling'), siblingRun.id);

    const before = await leaseRows([a.id, b.id, foreign.id, sibling.id]);
    await sleep(1100);
    const unknown = randomUUID();
    const res = await batch(service, 'w-batch', [b.id, unknown, a.id, c.id, foreign.id, sibling.id, a.id]);
    expect(res.status).toBe(200);
    const items = res.body.submissions as Record<string, unknown>[];
    expect(items.map((i) => [i.submission_id, i.held])).toEqual([
      [b.id, true],
      [unknown, false],
      [a.id, true],
      [c.id, false],
      [foreign.id, false],
      [sibling.id, false],
      [a.id, true],
    ]);
    for (const i of items) {
      expect(i.cancel_requested).toBe(false);
      expect(i.status).toBeNull();
      expect(i.reason).toBeNull();
      if (!i.held) expect(i.lease_expires_at).toBeNull();
    }
    const after = await leaseRows([a.id, b.id, foreign.id, sibling.id]);
    const at = (rows: typeof before, id: string, what: 'lease' | 'rolled') =>
      required(rows.get(id)?.[what], `${what} of ${id}`).getTime();
    for (const id of [a.id, b.id]) {
      expect(at(after, id, 'lease')).toBeGreaterThan(at(before, id, 'lease') + 1000);
      expect(at(after, id, 'rolled')).toBeGreaterThan(at(before, id, 'rolled') + 1000);
      const answer = items.find((i) => i.submission_id === id);
      expect(answer?.lease_expires_at).toBe(new Date(at(after, id, 'lease')).toISOString());
    }
    for (const id of [foreign.id, sibling.id]) expect(after.get(id)?.lease).toEqual(before.get(id)?.lease);

    for (const s of [a, b]) expect((await w.complete(s.id, DONE)).status).toBe(200);
    expect((await batch(service, 'w-batch', [a.id]).expect(200)).body.submissions[0].held).toBe(false);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('says which submissions to stop, with the status and reason of the cancellation above each', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 500,
      job_groups: [{ ref: 'g' }],
      jobs: [{ spec: jobSpec() }, { group_ref: 'g', spec: jobSpec() }],
    });
    const w = makeWorker(t, service, 'w-cancel');
    const claimed = await claimFor(w, run.id, 2);
    for (const s of claimed) expect((await w.running(s.id)).status).toBe(200);
    const inRoot = required(
      claimed.find((s) => s.job_group_id === 0),
      'the root job',
    );
    const inGroup = required(
      claimed.find((s) => s.job_group_id !== 0),
      'the job in the group',
    );
    await t.http
      .post(`${runUrl(run)}/job-groups/${inGroup.job_group_id}/cancel`)
      .set(owner.auth)
      .send({})
      .expect(200);

    let items = (await batch(service, 'w-cancel', [inRoot.id, inGroup.id]).expect(200)).body.submissions;
    expect(items[0]).toMatchObject({ held: true, cancel_requested: false, status: null, reason: null });
    expect(items[1]).toMatchObject({
      held: true,
      cancel_requested: true,
      status: 'terminated',
      reason: 'job_group_cancelled',
    });

    await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
    items = (await batch(service, 'w-cancel', [inRoot.id, inGroup.id]).expect(200)).body.submissions;
    // The root's abort applies to the root's job; the group's own (earlier) cancellation still names the other.
    expect(items[0]).toMatchObject({
      held: true,
      cancel_requested: true,
      status: 'aborted',
      reason: 'aborted_by_user',
    });
    expect(items[1]).toMatchObject({ cancel_requested: true, status: 'terminated', reason: 'job_group_cancelled' });
    // What the answer says to report is accepted.
    for (const [s, i] of [
      [inRoot, items[0]],
      [inGroup, items[1]],
    ] as const) {
      const done = await w.complete(s.id, { status: i.status, termination_reason: i.reason });
      expect(done.status).toBe(200);
    }
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('refuses a bad batch with a 400 naming the field, user tokens with a 403; 1,000 ids are fine', async () => {
    const bad: [string, unknown, string][] = [
      ['w-ok', [], 'submissions'],
      ['w-ok', Array.from({ length: 1001 }, () => randomUUID()), 'submissions'],
      ['w-ok', ['not-a-uuid'], 'submissions'],
      ['w-ok', 'x', 'submissions'],
      ['bad%20id!', [randomUUID()], 'worker_id'],
    ];
    for (const [workerId, submissions, field] of bad) {
      const res = await batch(service, workerId, submissions);
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body.details)).toContain(field);
    }
    await batch(owner, 'w-ok', [randomUUID()]).expect(403);
    const many = Array.from({ length: 1000 }, () => randomUUID());
    const res = await batch(service, 'w-ok', many).expect(200);
    expect(res.body.submissions).toHaveLength(1000);
    expect(res.body.submissions.every((i: { held: boolean }) => !i.held)).toBe(true);
  });

  it('hands jobs that ask for an image only to workers that declare a container runtime', async () => {
    const plain = { ...jobSpec(), image: undefined };
    // Ahead of everything else queued: the image job first, then the plain one.
    const run = await makeRun(t, owner, project, {
      priority: 1000,
      jobs: [{ spec: jobSpec({ image: 'python:3.12' }) }, { spec: plain }],
    });
    const claim = (capabilities?: object) =>
      t.http
        .post('/internal/v1/submissions/claim')
        .set(service.auth)
        .send({ worker_id: 'w-plain', capacity: { cpu: 64, memory_mib: 65536 }, limit: 100, capabilities })
        .expect(200);
    const jobOf = (n: number) =>
      required(
        run.jobs.find((j) => j.job_num === n),
        `job ${n}`,
      );

    // Without a runtime (absent, or an empty capabilities object): never the image job, whatever else is queued.
    for (const capabilities of [undefined, {}]) {
      const got = (await claim(capabilities)).body.submissions as { job_id: string; spec: { image?: string } }[];
      expect(got.filter((s) => s.spec.image !== undefined)).toEqual([]);
      expect(got.map((s) => s.job_id)).not.toContain(jobOf(0).id);
    }
    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body as RunResponse;
    expect(view.jobs.find((j) => j.job_num === 0)?.status).toBe('submitted');
    expect(view.jobs.find((j) => j.job_num === 1)?.status).toBe('provisioning');

    // With one, it is handed out.
    const got = (await claim({ container_runtime: 'docker' })).body.submissions as { job_id: string }[];
    expect(got.map((s) => s.job_id)).toContain(jobOf(0).id);

    // A bad runtime name is a 400 naming it.
    const res = await t.http
      .post('/internal/v1/submissions/claim')
      .set(service.auth)
      .send({ worker_id: 'w', capacity: { cpu: 1, memory_mib: 1 }, capabilities: { container_runtime: 'Docker!' } })
      .expect(400);
    expect(JSON.stringify(res.body.details)).toContain('capabilities.container_runtime');
  });

  it('a retry of an image job still needs a container runtime', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 1000,
      retry: { on_events: ['error'], max_attempts: 2 },
      jobs: [{ spec: jobSpec({ image: 'alpine' }) }],
    });
    const w: ReferenceWorker = makeWorker(t, service, 'w-docker');
    const [first] = await claimFor(w, run.id);
    const failed = await w.execute(first, {
      status: 'failed',
      termination_reason: 'container_exited_with_error',
      exit_status: 1,
    });
    expect(failed.body.retry_submission).not.toBeNull();
    const [row] = await t.dataSource.query(`SELECT needs_container FROM job_submissions WHERE id = $1`, [
      failed.body.retry_submission.id,
    ]);
    expect(row.needs_container).toBe(true);
  });

  it("names the run in each claimed submission and stores the worker's measurements with its report", async () => {
    const run = await makeRun(t, owner, project, { priority: 500, run_name: 'named-run', jobs: [{ spec: jobSpec() }] });
    const w = makeWorker(t, service, 'w-named');
    const [s] = await claimFor(w, run.id);
    expect((s as unknown as { run_name: string }).run_name).toBe('named-run');
    expect((await w.running(s.id)).status).toBe(200);
    const runtime = { exit_status: 0, wall_s: 1.25, cpu_s: 0.5, peak_memory_mib: 12.5 };
    const done = await t.http
      .post(`/internal/v1/submissions/${s.id}/complete`)
      .set(service.auth)
      .send({ worker_id: 'w-named', ...DONE, runtime_data: runtime })
      .expect(200);
    expect(done.body.status).toBe('done');
    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    // The newest submission's documents come once, on the last item of job_submissions.
    expect(view.jobs[0].job_submissions.at(-1).runtime_data).toEqual(runtime);
    expect(view.jobs[0].latest_job_submission).not.toHaveProperty('runtime_data');

    // Also on the retry path (a retryable failure), and a refused report stores nothing.
    const retried = await makeRun(t, owner, project, {
      priority: 500,
      retry: { on_events: ['error'], max_attempts: 2 },
      jobs: [{ spec: jobSpec() }],
    });
    const [r] = await claimFor(w, retried.id);
    expect((await w.running(r.id)).status).toBe(200);
    const failedData = { exit_status: 3, wall_s: 0.1 };
    await t.http
      .post(`/internal/v1/submissions/${r.id}/complete`)
      .set(other.auth)
      .send({ worker_id: 'w-named', ...DONE, runtime_data: { stolen: true } })
      .expect(404);
    await t.http
      .post(`/internal/v1/submissions/${r.id}/complete`)
      .set(service.auth)
      .send({
        worker_id: 'w-named',
        status: 'failed',
        termination_reason: 'container_exited_with_error',
        exit_status: 3,
        runtime_data: failedData,
      })
      .expect(200);
    const [row] = await t.dataSource.query(`SELECT runtime_data::text AS data FROM job_submissions WHERE id = $1`, [
      r.id,
    ]);
    expect(JSON.parse(row.data)).toEqual(failedData);
  });
});
