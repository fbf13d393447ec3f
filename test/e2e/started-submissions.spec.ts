import { Client } from 'pg';
import { DONE, ERROR } from '../../bench/reference-worker';
import { COMMIT_AHEAD_REFUSED } from '../../src/infra/database/commit-ahead';
import { MetricsService } from '../../src/infra/metrics/metrics.service';
import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { RunStatusService } from '../../src/modules/runs/run-status.service';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, describeRealPostgres, TestApp, TestUser } from '../support/test-app';
import { claimFor, invariants, makeBatchingWorker, makeWorker } from '../support/workers';

type QueryFn = (this: Client, ...args: unknown[]) => unknown;

/**
 * A final report of a submission this instance started (ReportApplier, StartedSubmissions) goes out in one round
 * trip: billing and counting queued behind the statement that locks and finishes it, COMMIT behind them, on the
 * facts the start left. What may have changed since is checked by that statement, which refuses (RP001) so that the
 * transaction runs again the ordinary way. On PostgreSQL: the embedded database does not pipeline.
 */
describeRealPostgres('final reports of submissions this instance started', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let adminUser: TestUser;
  let project: string;
  const refusals = async () =>
    (await t.app.get(MetricsService).transactionRetries.get()).values.find(
      (v) => v.labels.sqlstate === COMMIT_AHEAD_REFUSED,
    )?.value ?? 0;
  const runUrl = (runId: string) => `/api/v1/projects/${project}/runs/${runId}`;
  const rootCounts = async (runId: string) =>
    (
      await t.http
        .get(`${runUrl(runId)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body.counts;

  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'started' });
    [owner, service, adminUser] = await Promise.all([t.user(), t.user('service'), t.user('admin')]);
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());
  afterEach(async () => expect(await invariants(t, adminUser)).toMatchObject({ ok: true }));

  /** A statement of the report path, told by its text (named or not: behind PgBouncer statements go unnamed). */
  const statementOf = (text: string): string =>
    text === 'COMMIT' || text === 'BEGIN'
      ? text
      : /FOR UPDATE OF s, j/.test(text) && /jobs_finished AS/.test(text)
        ? 'lock and finish'
        : /billing_attempts/.test(text)
          ? 'billing'
          : /job_group_counters/.test(text)
            ? 'counting'
            : text.slice(0, 40);

  /**
   * What the connection that ran `statement` was asked to send, and when its answers came, while `fn` runs (other
   * connections' statements left out: followers' wake-ups, settles).
   */
  async function wireOf(statement: string, fn: () => Promise<unknown>): Promise<string[]> {
    await t.app.get(RunStatusService).settled();
    const events: { client: Client; event: string }[] = [];
    const original = Client.prototype.query as QueryFn;
    const spy = jest.spyOn(Client.prototype, 'query').mockImplementation(function (this: Client, ...args: unknown[]) {
      const first = args[0] as string | { text?: string };
      const label = statementOf((typeof first === 'string' ? first : first.text) ?? '?');
      events.push({ client: this, event: `send ${label}` });
      const result = original.apply(this, args);
      if (result instanceof Promise)
        result.then(
          () => events.push({ client: this, event: `answer ${label}` }),
          () => events.push({ client: this, event: `error ${label}` }),
        );
      return result;
    });
    try {
      await fn();
    } finally {
      spy.mockRestore();
    }
    const client = events.find((e) => e.event === `send ${statement}`)?.client;
    return events.filter((e) => e.client === client).map((e) => e.event);
  }

  it('a success goes out whole: every statement of its transaction sent before the first answer', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 3 }] });
    const w = makeWorker(t, service, 'started-whole');
    const held = await claimFor(w, run.id, 3);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    const before = await refusals();

    const events = await wireOf('lock and finish', async () =>
      expect((await w.complete(held[0].id, DONE)).status).toBe(200),
    );
    const locking = events.indexOf('send lock and finish');
    const answered = events.indexOf('answer lock and finish');
    expect(locking).toBeGreaterThanOrEqual(0);
    const sentBeforeAnswer = events.slice(locking, answered);
    // Billing's closing statement, the counting, and COMMIT were queued before the locking statement was answered
    // (on a pipelining connection, written with it: one round trip).
    expect(sentBeforeAnswer.filter((e) => e.startsWith('send '))).toEqual([
      'send lock and finish',
      'send billing',
      'send counting',
      'send COMMIT',
    ]);

    // The other two in one batch: one transaction, same shortcut; answers as the single route's.
    const batch = await t.http
      .post('/internal/v1/submissions/reports')
      .set(service.auth)
      .send({
        worker_id: 'started-whole',
        reports: held.slice(1).map((s) => ({ submission_id: s.id, kind: 'complete', ...DONE })),
      })
      .expect(200);
    expect(batch.body.results).toEqual(
      held.slice(1).map((s) => ({
        submission_id: s.id,
        kind: 'complete',
        status_code: 200,
        body: { submission_id: s.id, status: 'done', termination_reason: 'done_by_runner', retry_submission: null },
      })),
    );
    expect(await refusals()).toBe(before);
    expect(await rootCounts(run.id)).toMatchObject({ n_jobs: 3, n_completed: 3, n_succeeded: 3 });
    await t.app.get(RunStatusService).settled([run.id]);
    expect((await t.http.get(runUrl(run.id)).set(owner.auth).expect(200)).body.status).toBe('done');
  });

  it('repeated, or from another worker: the ordinary answers, with no refusal', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 2 }] });
    const w = makeWorker(t, service, 'started-repeat');
    const [a, b] = await claimFor(w, run.id, 2);
    for (const s of [a, b]) expect((await w.running(s.id)).status).toBe(200);
    const before = await refusals();
    const first = await w.complete(a.id, DONE);
    expect(first.status).toBe(200);
    // Repeated: the same answer, nothing changed (the submission is no longer remembered).
    expect(await w.complete(a.id, DONE)).toEqual(first);
    // Another worker id of the same account: 409, and the holder's own report still goes through after.
    const other = makeWorker(t, service, 'started-impostor');
    const refused = await other.complete(b.id, DONE);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('STALE_SUBMISSION');
    expect((await w.complete(b.id, DONE)).status).toBe(200);
    expect(await refusals()).toBe(before);
    expect(await rootCounts(run.id)).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 2 });
  });

  it('a failure its run retries goes the ordinary way and forgets the start: a late success is stale', async () => {
    const run = await makeRun(t, owner, project, { retry: { on_events: ['error'], max_attempts: 2 } });
    const w = makeWorker(t, service, 'started-retried');
    const [s] = await claimFor(w, run.id, 1);
    expect((await w.running(s.id)).status).toBe(200);
    const before = await refusals();
    const failed = await w.complete(s.id, ERROR);
    expect(failed.body).toMatchObject({ status: 'failed', retry_submission: { submission_num: 1 } });
    // Remembered still, this report would be sent on the start's facts and refused (RP001) before its 409.
    const late = await w.complete(s.id, DONE);
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('STALE_SUBMISSION');
    expect(await refusals()).toBe(before);
    expect(await rootCounts(run.id)).toMatchObject({ n_jobs: 1, n_completed: 0 });
  });

  it('a failure no retry concerns goes out whole, and is counted as one', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 2 }] });
    const w = makeWorker(t, service, 'started-failure');
    const held = await claimFor(w, run.id, 2);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    // The run's retry policy (none) is remembered once one of its reports was judged the ordinary way.
    expect((await w.complete(held[0].id, DONE)).status).toBe(200);
    const before = await refusals();
    const events = await wireOf('lock and finish', async () =>
      expect((await w.complete(held[1].id, ERROR)).body).toMatchObject({ status: 'failed', retry_submission: null }),
    );
    const locking = events.indexOf('send lock and finish');
    const sentBeforeAnswer = events.slice(locking, events.indexOf('answer lock and finish'));
    expect(sentBeforeAnswer.filter((e) => e.startsWith('send '))).toEqual([
      'send lock and finish',
      'send billing',
      'send counting',
      'send COMMIT',
    ]);
    expect(await refusals()).toBe(before);
    expect(await rootCounts(run.id)).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 1, n_failed: 1 });
  });

  it('a failure on a chain with fail-fast: refused once, then the group fails fast exactly once', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'ff', cancel_after_n_failures: 1 }],
      jobs: [{ group_ref: 'ff', spec: jobSpec(), replicas: 3 }],
    });
    const w = makeWorker(t, service, 'started-failfast');
    const held = await claimFor(w, run.id, 3);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    const before = await refusals();
    // Two failures due at once: one batch, one transaction (makeBatchingWorker), under the same holder.
    const batching = makeBatchingWorker(t, service, 'started-failfast');
    const failed = await Promise.all(held.slice(0, 2).map((s) => batching.complete(s.id, ERROR)));
    expect(failed.map((r) => r.status)).toEqual([200, 200]);
    expect(await refusals()).toBe(before + 1);
    const cancellations = await t.dataSource.query(
      `SELECT job_group_id, reason FROM job_groups_cancelled WHERE run_id = $1`,
      [run.id],
    );
    expect(cancellations).toEqual([expect.objectContaining({ reason: 'fail_fast' })]);
    // The run is now counted the ordinary way on this instance: its next failure is not refused again.
    // Still running below the cancelled group: its failure report is taken.
    const third = await w.complete(held[2].id, ERROR);
    expect(third.status).toBe(200);
    expect(await refusals()).toBe(before + 1);
  });

  it('a dependent added while it ran: refused once, then the dependent released the ordinary way', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ name: 'parent', spec: jobSpec() }] });
    const w = makeWorker(t, service, 'started-parent');
    const [parent] = await claimFor(w, run.id, 1);
    expect((await w.running(parent.id)).status).toBe(200);
    const added = await t.http
      .post(`${runUrl(run.id)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ name: 'child', depends_on: [parent.job_id], spec: jobSpec() }] })
      .expect(201);
    expect(added.body.jobs[0]).toMatchObject({ status: 'pending', n_pending_parents: 1 });

    const before = await refusals();
    expect((await w.complete(parent.id, DONE)).status).toBe(200);
    expect(await refusals()).toBe(before + 1);
    const [child] = await claimFor(w, run.id, 1);
    expect(child.job_name).toBe('child');
    expect((await w.running(child.id)).status).toBe(200);
    expect((await w.complete(child.id, DONE)).status).toBe(200);
    expect(await refusals()).toBe(before + 1);
    expect(await rootCounts(run.id)).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 2 });
  });

  it('a lease that lapsed while it ran: refused once, then answered as stale, nothing counted twice', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const w = makeWorker(t, service, 'started-lapsed');
    const [s] = await claimFor(w, run.id, 1);
    expect((await w.running(s.id)).status).toBe(200);
    await t.dataSource.query(
      `UPDATE job_submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [s.id],
    );
    expect(await t.app.get(ServerTransitionsService).expireLapsedLeases(100)).toBe(1);

    const before = await refusals();
    const late = await w.complete(s.id, DONE);
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('STALE_SUBMISSION');
    expect(await refusals()).toBe(before + 1);
    const sub = (
      await t.dataSource.query(`SELECT status, termination_reason FROM job_submissions WHERE id = $1`, [s.id])
    )[0];
    expect(sub).toEqual({ status: 'failed', termination_reason: 'instance_unreachable' });
  });
});
