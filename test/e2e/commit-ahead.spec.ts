import { Client, type PoolClient } from 'pg';
import { QueryFailedError, type QueryRunner } from 'typeorm';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { DONE } from '../../bench/reference-worker';
import { databaseFailure } from '../../src/common/errors/database-unavailable';
import { commitQueued, COMMIT_AHEAD_REFUSED } from '../../src/infra/database/commit-ahead';
import { preparedQuery } from '../../src/infra/database/prepared';
import { TransactionRunner } from '../../src/infra/database/transaction.runner';
import { MetricsService } from '../../src/infra/metrics/metrics.service';
import { RunStatusService } from '../../src/modules/runs/run-status.service';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { workerDatabaseUrl } from '../support/test-databases';
import { claimFor, invariants, makeWorker } from '../support/workers';

/**
 * COMMIT queued behind a transaction's last statement (commit-ahead.ts): the transaction commits with it, a statement
 * queued after it is refused, and a statement that refuses (RP001) leaves nothing behind and has the work run again.
 * Then the lifecycle's use of it: a completion whose group was cancelled while it ran is refused the shortcut and
 * counted the ordinary way, once.
 */
describe('commit ahead: COMMIT queued behind the last statement', () => {
  let t: TestApp;
  let runner: TransactionRunner;
  let admin: Client;
  let owner: TestUser;
  let service: TestUser;
  let adminUser: TestUser;
  const rows = async (label: string) =>
    (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM commit_ahead_probe WHERE label = $1', [label]))
      .rows[0].n;
  const insert = (label: string) => `INSERT INTO commit_ahead_probe (label) VALUES ('${label}')`;
  const refusals = async () =>
    (await t.app.get(MetricsService).transactionRetries.get()).values.find(
      (v) => v.labels.sqlstate === COMMIT_AHEAD_REFUSED,
    )?.value ?? 0;

  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'commitahead' });
    runner = t.app.get(TransactionRunner);
    admin = new Client({
      connectionString: await workerDatabaseUrl('commitahead'),
      application_name: 'runplane-test-admin',
    });
    await admin.connect();
    await admin.query('CREATE TABLE IF NOT EXISTS commit_ahead_probe (label text NOT NULL)');
    [owner, service, adminUser] = await Promise.all([t.user(), t.user('service'), t.user('admin')]);
  });
  afterAll(async () => {
    await admin.query('DROP TABLE IF EXISTS commit_ahead_probe');
    await admin.end();
    await t.close();
  });

  it('commits with the statement it is queued behind', async () => {
    const queued = await runner.run(async (m) => {
      await m.query(insert('ahead-first'));
      await preparedQuery(m, 'test_commit_ahead_last', insert('ahead-last'), [], { commitAfter: true });
      // Its answer came back; so has the COMMIT's by now or soon: nothing else is sent in this transaction.
      return (
        commitQueued((m.queryRunner as QueryRunner & { databaseConnection: PoolClient }).databaseConnection) !==
        undefined
      );
    });
    expect(queued).toBe(true);
    expect([await rows('ahead-first'), await rows('ahead-last')]).toEqual([1, 1]);
    // The connection went back to the pool usable: the next transaction commits the ordinary way.
    await runner.run((m) => m.query(insert('ahead-after')));
    expect(await rows('ahead-after')).toBe(1);
  });

  it('refuses a statement queued after the COMMIT; what came before stands committed', async () => {
    const err = await runner
      .run(async (m) => {
        await preparedQuery(m, 'test_commit_ahead_then_more', insert('ahead-then-more'), [], { commitAfter: true });
        await m.query(insert('after-the-commit'));
      })
      .catch((e: unknown) => e);
    expect(String((err as Error).message)).toMatch(/queued after its transaction’s COMMIT/);
    expect([await rows('ahead-then-more'), await rows('after-the-commit')]).toEqual([1, 0]);
  });

  it('never retries a lost connection once the COMMIT is queued: the server may have applied it', async () => {
    let attempts = 0;
    const err = await runner
      .run(async (m) => {
        attempts++;
        await preparedQuery(m, 'test_commit_ahead_then_lost', insert('ahead-then-lost'), [], { commitAfter: true });
        // What a session ending now would raise (SQLSTATE 57P01: terminated by the administrator).
        throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
      })
      .catch((e: unknown) => e);
    expect(databaseFailure(err)).toBe('connection_lost');
    expect(attempts).toBe(1);
    expect(await rows('ahead-then-lost')).toBe(1); // the COMMIT went with the statement
  });

  it('a refusal (RP001) leaves nothing of the transaction and runs its work again at once', async () => {
    const before = await refusals();
    let attempts = 0;
    const result = await runner.run(async (m) => {
      attempts++;
      await m.query(insert('refused-then-ordinary'));
      // The first attempt refuses its commit ahead; the second, told so, commits the ordinary way.
      if (attempts === 1)
        await preparedQuery(m, 'test_commit_ahead_refused', `SELECT runplane_refuse_commit_ahead('test') AS r`, [], {
          commitAfter: true,
        });
      return attempts;
    });
    expect(result).toBe(2);
    expect(await rows('refused-then-ordinary')).toBe(1);
    expect(await refusals()).toBe(before + 1);
  });

  it('a refusal that outlives the retries is the error; nothing stands', async () => {
    const err = await runner
      .run(async (m) => {
        await m.query(insert('always-refused'));
        await preparedQuery(m, 'test_commit_ahead_always', `SELECT runplane_refuse_commit_ahead('test') AS r`, [], {
          commitAfter: true,
        });
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueryFailedError);
    expect(((err as QueryFailedError).driverError as { code?: string }).code).toBe(COMMIT_AHEAD_REFUSED);
    expect(await rows('always-refused')).toBe(0);
  });

  it('a completion in a group cancelled while it ran: refused once, then counted the ordinary way', async () => {
    const project = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'g' }],
      jobs: [{ group_ref: 'g', spec: jobSpec() }, { spec: jobSpec() }],
    });
    const w = makeWorker(t, service, 'commit-ahead-worker');
    const held = await claimFor(w, run.id, 2);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    const inGroup = held.find((s) => s.job_group_id !== 0);
    const inRoot = held.find((s) => s.job_group_id === 0);
    if (!inGroup || !inRoot) throw new Error('expected one job in the group and one in the root');
    const runUrl = `/api/v1/projects/${project}/runs/${run.id}`;
    await t.http.post(`${runUrl}/job-groups/${inGroup.job_group_id}/cancel`).set(owner.auth).send({}).expect(200);

    const before = await refusals();
    // The worker has not heard of the cancellation: it reports its job done. The cancellation counted that job
    // already, so the counting refuses to commit ahead (the job's flag must be put back), and the retry does it.
    const late = await w.complete(inGroup.id, DONE);
    expect(late.status).toBe(200);
    expect(await refusals()).toBe(before + 1);
    // The run is remembered: its next completion is counted the ordinary way, with no second refusal.
    expect((await w.complete(inRoot.id, DONE)).status).toBe(200);
    expect(await refusals()).toBe(before + 1);

    const group = (await t.http.get(`${runUrl}/job-groups/${inGroup.job_group_id}`).set(owner.auth).expect(200)).body;
    expect(group).toMatchObject({ status: 'cancelled', counts: { n_jobs: 1, n_completed: 1, n_cancelled: 1 } });
    const root = (await t.http.get(`${runUrl}/job-groups/0`).set(owner.auth).expect(200)).body;
    expect(root.counts).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 1, n_cancelled: 1 });
    expect(await invariants(t, adminUser)).toMatchObject({ ok: true });
  });

  it('a batch across groups, one of them cancelled meanwhile: refused once, every job counted once', async () => {
    const project = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'a' }, { ref: 'b' }],
      jobs: [
        { group_ref: 'a', spec: jobSpec() },
        { group_ref: 'b', spec: jobSpec() },
      ],
    });
    const w = makeWorker(t, service, 'commit-ahead-batch');
    const held = await claimFor(w, run.id, 2);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    const [first, second] = [...held].sort((x, y) => x.job_group_id - y.job_group_id);
    const runUrl = `/api/v1/projects/${project}/runs/${run.id}`;
    await t.http.post(`${runUrl}/job-groups/${first.job_group_id}/cancel`).set(owner.auth).send({}).expect(200);

    const before = await refusals();
    // Both in one transaction: the chains' counting statement refuses for the cancelled group's job.
    const batch = await t.http
      .post('/internal/v1/submissions/reports')
      .set(service.auth)
      .send({
        worker_id: 'commit-ahead-batch',
        reports: held.map((s) => ({ submission_id: s.id, kind: 'complete', ...DONE })),
      })
      .expect(200);
    expect(batch.body.results.map((r: { status_code: number }) => r.status_code)).toEqual([200, 200]);
    expect(await refusals()).toBe(before + 1);

    const groupOf = async (g: number) =>
      (await t.http.get(`${runUrl}/job-groups/${g}`).set(owner.auth).expect(200)).body;
    expect(await groupOf(first.job_group_id)).toMatchObject({ counts: { n_completed: 1, n_cancelled: 1 } });
    expect(await groupOf(second.job_group_id)).toMatchObject({ counts: { n_completed: 1, n_succeeded: 1 } });
    expect((await groupOf(0)).counts).toMatchObject({ n_jobs: 2, n_completed: 2, n_succeeded: 1, n_cancelled: 1 });
    expect(await invariants(t, adminUser)).toMatchObject({ ok: true });
  });

  it('a completion with nothing to follow commits ahead: no refusal, counted once', async () => {
    const project = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 6 }] });
    const w = makeWorker(t, service, 'commit-ahead-plain');
    const held = await claimFor(w, run.id, 6);
    for (const s of held) expect((await w.running(s.id)).status).toBe(200);
    const before = await refusals();
    const commits = jest.spyOn(PostgresQueryRunner.prototype, 'commitTransaction');
    try {
      // One at a time: each its own transaction, whose counting statement goes with its COMMIT. TypeORM's own
      // commit then runs only for the settles that record a status (the run done), not for the completions.
      for (const s of held) expect((await w.complete(s.id, DONE)).status).toBe(200);
      await t.app.get(RunStatusService).settled([run.id]);
      expect(commits.mock.calls.length).toBeLessThan(held.length / 2);
    } finally {
      commits.mockRestore();
    }
    expect(await refusals()).toBe(before);
    const root = (
      await t.http.get(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0`).set(owner.auth).expect(200)
    ).body;
    expect(root.counts).toMatchObject({ n_jobs: 6, n_completed: 6, n_succeeded: 6 });
    expect(await invariants(t, adminUser)).toMatchObject({ ok: true });
  });
});
