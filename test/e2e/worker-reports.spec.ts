import { randomUUID } from 'node:crypto';
import { DONE, ERROR, Outcome, ReferenceWorker } from '../../bench/reference-worker';
import { FINISHED_STATUSES, TERMINATION_REASONS, WORKER_REPORTABLE } from '../../src/modules/lifecycle/vocabulary';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';

/**
 * Worker reports are accepted only from the service account and worker id that claimed the submission, and only
 * as the state machine allows ((status, reason) pairs, and outcomes from the submission's status). Every refused
 * report is checked to change nothing: the submission's row, and the job, group and run as the API shows them.
 */
describe('worker reports: bound to the claiming account, checked against the state machine', () => {
  let t: TestApp;
  let owner: TestUser;
  let accountA: TestUser;
  let accountB: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'workers' });
    owner = await t.user();
    accountA = await t.user('service');
    accountB = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterEach(async () => {
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;

  /** Everything a refused report must leave as it was: the submission's row and the API's view of its run. */
  const snapshot = async (run: RunResponse, submissionId: string) => {
    const [row] = await t.dataSource.query(
      `SELECT status, termination_reason, exit_status, worker_id, claimed_by_user_id, claimed_at, started_at,
              finished_at, lease_expires_at, last_heartbeat_at, provisioning_data::text, runtime_data::text
         FROM job_submissions WHERE id = $1`,
      [submissionId],
    );
    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body as RunResponse;
    const group = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body;
    const usage = await t.dataSource.query(
      `SELECT started_at, rolled_up_to, closed_at FROM billing_attempts WHERE submission_id = $1`,
      [submissionId],
    );
    // Costs of running work grow with the clock; everything else must stay as it was.
    const withoutCosts = (v: unknown) => JSON.parse(JSON.stringify(v, (k, x) => (/cost/.test(k) ? undefined : x)));
    return { row, run: withoutCosts(view), group: withoutCosts(group), usage };
  };

  /** A worker of account B that presents account A's worker id. */
  const impostor = (w: ReferenceWorker) => makeWorker(t, accountB, w.workerId);

  it('records the claiming account with the lease', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const w = makeWorker(t, accountA, 'w-record');
    const [s] = await claimFor(w, run.id);
    const [row] = await t.dataSource.query(`SELECT worker_id, claimed_by_user_id FROM job_submissions WHERE id = $1`, [
      s.id,
    ]);
    expect(row).toEqual({ worker_id: 'w-record', claimed_by_user_id: accountA.id });
    await w.execute(s, DONE);
  });

  // A refused report changes nothing.
  it("B cannot report running, heartbeat or complete for A's submission, even with A's worker id: 404", async () => {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['error'], max_attempts: 3 },
      jobs: [{ spec: jobSpec() }],
    });
    const a = makeWorker(t, accountA, 'w-shared-id');
    const b = impostor(a);
    const [s] = await claimFor(a, run.id);
    const unknown = await b.complete(randomUUID(), DONE);
    expect(unknown.status).toBe(404);
    /** B's answer is an unknown id's answer: same status, code and shape, nothing about the submission. */
    const expectUnknown = (res: { status: number; body: { code: string; message: string; details: unknown[] } }) => {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({
        status_code: 404,
        code: 'NOT_FOUND',
        message: `submission ${s.id} not found`,
        details: [],
      });
      expect(Object.keys(res.body).sort()).toEqual(Object.keys(unknown.body).sort());
    };
    const attempts: (() => Promise<void>)[] = [
      async () => expectUnknown(await b.running(s.id)),
      async () => expectUnknown(await b.heartbeat(s.id)),
      async () => expectUnknown(await b.complete(s.id, DONE)), // the one-statement finish
      async () => expectUnknown(await b.complete(s.id, ERROR)), // the retryable path
      async () =>
        expectUnknown(await b.complete(s.id, { status: 'terminated', termination_reason: 'stopped_by_user' })),
      async () => expectUnknown(await b.complete(s.id, { status: 'aborted', termination_reason: 'aborted_by_user' })),
    ];

    // While provisioning.
    let before = await snapshot(run, s.id);
    expect(before.row).toMatchObject({ status: 'provisioning', claimed_by_user_id: accountA.id });
    for (const attempt of attempts) await attempt();
    expect(await snapshot(run, s.id)).toEqual(before);

    // While running (B could otherwise keep the lease alive, or finish it as done).
    expect((await a.running(s.id)).status).toBe(200);
    before = await snapshot(run, s.id);
    expect(before.row.status).toBe('running');
    for (const attempt of attempts) await attempt();
    expect(await snapshot(run, s.id)).toEqual(before);
    expect(before.group.counts).toMatchObject({ n_jobs: 1, n_completed: 0 });

    // A's own reports still work, and after A's final report B still learns nothing.
    expect((await a.heartbeat(s.id)).status).toBe(200);
    const done = await a.complete(s.id, DONE);
    expect(done.status).toBe(200);
    before = await snapshot(run, s.id);
    for (const attempt of attempts) await attempt();
    expect(await snapshot(run, s.id)).toEqual(before);
    expect((await a.complete(s.id, DONE)).body).toEqual(done.body);
    expect(before.group.counts).toMatchObject({ n_jobs: 1, n_completed: 1, n_succeeded: 1 });
  });

  it("a submission B claimed is B's: A gets 404 on it; both accounts' workers run their own side by side", async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 2 }] });
    const a = makeWorker(t, accountA, 'w-same');
    const b = makeWorker(t, accountB, 'w-same');
    const [sa] = await claimFor(a, run.id);
    const [sb] = await claimFor(b, run.id);
    expect(sa.id).not.toBe(sb.id);
    expect((await a.running(sb.id)).status).toBe(404);
    expect((await b.running(sa.id)).status).toBe(404);
    expect((await a.execute(sa, DONE)).status).toBe(200);
    expect((await a.complete(sb.id, DONE)).status).toBe(404);
    expect((await b.execute(sb, DONE)).status).toBe(200);
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body.status).toBe('done');
  });

  it('another worker id of the same account keeps getting 409 STALE_SUBMISSION', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const a = makeWorker(t, accountA, 'w-one');
    const [s] = await claimFor(a, run.id);
    const before = await snapshot(run, s.id);
    const other = makeWorker(t, accountA, 'w-two');
    for (const res of [
      await other.running(s.id),
      await other.heartbeat(s.id),
      await other.complete(s.id, DONE),
      await other.complete(s.id, ERROR),
    ]) {
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('STALE_SUBMISSION');
    }
    expect(await snapshot(run, s.id)).toEqual(before);
    await a.execute(s, DONE);
  });

  // A refused pair changes nothing.
  it('refuses every (status, termination_reason) pair the state machine forbids: 400 naming the field', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const a = makeWorker(t, accountA, 'w-pairs');
    const [s] = await claimFor(a, run.id);
    expect((await a.running(s.id)).status).toBe(200);
    const before = await snapshot(run, s.id);
    let refused = 0;
    for (const status of FINISHED_STATUSES) {
      for (const reason of TERMINATION_REASONS) {
        if ((WORKER_REPORTABLE[status] as readonly string[]).includes(reason)) continue;
        const res = await a.complete(s.id, { status, termination_reason: reason } as Outcome);
        expect([status, reason, res.status, res.body.code]).toEqual([status, reason, 400, 'VALIDATION_FAILED']);
        expect(res.body.details).toEqual([
          { field: 'termination_reason', message: expect.stringContaining(`when status is ${status}`) },
        ]);
        refused++;
      }
    }
    // 4 statuses × 14 reasons, less the 13 pairs a worker may report.
    expect(refused).toBe(4 * 14 - 13);
    const unknownStatus = await a.complete(s.id, {
      status: 'succeeded',
      termination_reason: 'done_by_runner',
    } as unknown as Outcome);
    expect(unknownStatus.status).toBe(400);
    expect(unknownStatus.body.details.map((d: { field: string }) => d.field)).toEqual(['status']);
    const unknownReason = await a.complete(s.id, {
      status: 'failed',
      termination_reason: 'gremlins',
    } as unknown as Outcome);
    expect(unknownReason.body.details.map((d: { field: string }) => d.field)).toEqual(['termination_reason']);
    expect(await snapshot(run, s.id)).toEqual(before);
    expect((await a.complete(s.id, DONE)).status).toBe(200);
  });

  // The 409 changes nothing.
  it('refuses done (or another outcome needing a started job) before running was reported: 409', async () => {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['error'], max_attempts: 3 },
      jobs: [{ spec: jobSpec() }],
    });
    const a = makeWorker(t, accountA, 'w-early');
    const [s] = await claimFor(a, run.id);
    const before = await snapshot(run, s.id);
    const refusedOutcomes: Outcome[] = [
      DONE, // the one-statement finish
      ERROR, // the retryable path
      { status: 'failed', termination_reason: 'interrupted_by_no_capacity' },
      { status: 'failed', termination_reason: 'log_quota_exceeded' },
      { status: 'terminated', termination_reason: 'max_duration_exceeded' },
    ];
    for (const outcome of refusedOutcomes) {
      const res = await a.complete(s.id, outcome);
      expect([outcome.termination_reason, res.status, res.body.code]).toEqual([
        outcome.termination_reason,
        409,
        'TRANSITION_NOT_ALLOWED',
      ]);
      expect(res.body.message).toContain('never reported running');
      expect(res.body.details[0]).toMatchObject({
        field: 'status',
        message: expect.stringContaining(
          'failed (failed_to_start_due_to_no_capacity, executor_error, instance_unreachable)',
        ),
      });
    }
    expect(await snapshot(run, s.id)).toEqual(before);
    // Still the worker's to start, and then `done` is fine.
    await a.execute(s, DONE);
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body.status).toBe('done');
  });

  it('the OpenAPI document lists the statuses and reasons complete accepts, and the pairs', async () => {
    const doc = (await t.http.get('/docs-json').expect(200)).body;
    const props = doc.components.schemas.CompleteDto.properties;
    expect(props.status.enum).toEqual([...FINISHED_STATUSES]);
    expect(props.termination_reason.enum).toEqual(TERMINATION_REASONS.filter((r) => r !== 'dependency_failed'));
    // Every status with the reasons a worker may report with it, in the order of the table.
    for (const status of FINISHED_STATUSES)
      expect(props.termination_reason.description).toContain(
        `\`${status}\`: ${WORKER_REPORTABLE[status].map((r) => `\`${r}\``).join(', ')}`,
      );
    expect(doc.components.schemas.ClaimDto.properties.worker_id.pattern).toEqual(expect.any(String));
  });

  it('accepts the outcomes allowed before running: failing to start, and a cancellation seen before it', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 3 }] });
    const a = makeWorker(t, accountA, 'w-prestart');
    const [s1, s2, s3] = await claimFor(a, run.id, 3);
    const executorError = await a.complete(s1.id, { status: 'failed', termination_reason: 'executor_error' });
    expect(executorError.body).toMatchObject({
      status: 'failed',
      termination_reason: 'executor_error',
      retry_submission: null,
    });
    expect((await a.complete(s2.id, { status: 'terminated', termination_reason: 'job_group_cancelled' })).status).toBe(
      200,
    );
    expect((await a.complete(s3.id, { status: 'aborted', termination_reason: 'aborted_by_user' })).status).toBe(200);
    const group = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(group.counts).toMatchObject({ n_jobs: 3, n_completed: 3, n_failed: 1, n_cancelled: 2 });
  });
});
