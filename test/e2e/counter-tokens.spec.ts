import { DONE, ERROR } from '../../bench/reference-worker';
import { RunStatusService } from '../../src/modules/runs/run-status.service';
import { feedReadable } from '../support/event-feed';
import { jobSpec, makeProject, makeRun, type RunResponse } from '../support/factories';
import { createTestApp, embeddedOnly, TestApp, TestUser, uniqueName } from '../support/test-app';
import { claimFor, invariants, makeWorker } from '../support/workers';

const itOnPostgres = embeddedOnly ? it.skip : it;

/**
 * Counters spread over token rows (no row every completion of a run waits for), statuses settled after the commits
 * that move them, and fail-fast exact under concurrent failures: with concurrent requests on real PostgreSQL.
 */
describe('spread counters and settled statuses', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'tokens' });
    [owner, service, admin] = await Promise.all([t.user(), t.user('service'), t.user('admin')]);
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  /** The run's events of a type, once the feed can show everything done before now. */
  const events = async (run: RunResponse, type: string) => {
    await feedReadable(t);
    return (
      await t.http
        .get(`/api/v1/projects/${project}/events`)
        .query({ run_id: run.id, type, limit: 100 })
        .set(owner.auth)
        .expect(200)
    ).body.items as { status: string; reason: string | null; job_group_id: number }[];
  };

  /** Every job of a run claimed by `workers` workers and reported running; each worker's share. */
  const startAll = async (run: RunResponse, workers: number, jobs: number) => {
    const ws = Array.from({ length: workers }, (_, i) => makeWorker(t, service, uniqueName(`w${i}`)));
    const held = await Promise.all(ws.map((w) => claimFor(w, run.id, Math.ceil(jobs / workers))));
    for (const [i, w] of ws.entries()) for (const s of held[i]) expect((await w.running(s.id)).status).toBe(200);
    return ws.map((w, i) => ({ w, held: held[i] }));
  };

  itOnPostgres('fail-fast under concurrent failures cancels exactly once, in a failure’s transaction', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'f', cancel_after_n_failures: 3 }],
      jobs: [{ group_ref: 'f', spec: jobSpec(), replicas: 12 }, { spec: jobSpec() }],
    });
    const shares = await startAll(run, 4, 13);
    const inGroup = shares.flatMap(({ w, held }) => held.filter((s) => s.job_group_id !== 0).map((s) => ({ w, s })));
    expect(inGroup).toHaveLength(12);
    // All twelve fail at once: half through the single route, half in batches of three.
    const singles = inGroup.slice(0, 6).map(({ w, s }) => w.complete(s.id, ERROR));
    const batches = [inGroup.slice(6, 9), inGroup.slice(9, 12)].map((part) =>
      t.http
        .post('/internal/v1/submissions/reports')
        .set(service.auth)
        .send({
          worker_id: part[0].w.workerId,
          reports: part
            .filter((p) => p.w === part[0].w)
            .map(({ s }) => ({ submission_id: s.id, kind: 'complete', ...ERROR })),
        }),
    );
    // Reports of another worker in a batch part go on their own route.
    const strays = [inGroup.slice(6, 9), inGroup.slice(9, 12)].flatMap((part) =>
      part.filter((p) => p.w !== part[0].w).map(({ w, s }) => w.complete(s.id, ERROR)),
    );
    const answers = await Promise.all([...singles, ...strays]);
    for (const a of answers) expect(a.status).toBe(200);
    for (const b of await Promise.all(batches)) {
      expect(b.status).toBe(200);
      for (const r of b.body.results) expect(r.status_code).toBe(200);
    }
    const group = inGroup[0].s.job_group_id;
    const cancelled = await t.dataSource.query(
      `SELECT x.reason, x.xmin::text AS xmin FROM job_groups_cancelled x WHERE x.run_id = $1 AND x.job_group_id = $2`,
      [run.id, group],
    );
    expect(cancelled.map((c: { reason: string }) => c.reason)).toEqual(['fail_fast']);
    // Written by the transaction that finished one of the failures.
    const [{ n }] = await t.dataSource.query(
      `SELECT count(*)::int AS n FROM job_submissions WHERE run_id = $1 AND status = 'failed' AND xmin::text = $2`,
      [run.id, cancelled[0].xmin],
    );
    expect(n).toBeGreaterThan(0);
    expect((await events(run, 'group.cancelled')).map((e) => [e.job_group_id, e.reason])).toEqual([
      [group, 'fail_fast'],
    ]);
    const view = (
      await t.http
        .get(`${runUrl(run)}/job-groups/${group}`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(view.status).toBe('failure');
    expect(view.counts.n_failed).toBeGreaterThanOrEqual(3);
    expect(view.counts.n_failed + view.counts.n_cancelled).toBe(12);
    expect((await events(run, 'group.status')).map((e) => e.status)).toEqual(['failure']);
    const root = shares.flatMap(({ w, held }) => held.filter((s) => s.job_group_id === 0).map((s) => ({ w, s })));
    await root[0].w.complete(root[0].s.id, DONE);
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body.status).toBe('failed');
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  itOnPostgres('the last completions of a run, reported at once, leave it done: one run.status done', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'a' }, { ref: 'b', parent_ref: 'a' }],
      jobs: [
        { spec: jobSpec(), replicas: 10 },
        { group_ref: 'a', spec: jobSpec(), replicas: 10 },
        { group_ref: 'b', spec: jobSpec(), replicas: 10 },
      ],
    });
    const shares = await startAll(run, 6, 30);
    expect(shares.reduce((n, s) => n + s.held.length, 0)).toBe(30);
    const answers = await Promise.all(shares.flatMap(({ w, held }) => held.map((s) => w.complete(s.id, DONE))));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body).toMatchObject({
      status: 'done',
      termination_reason: 'all_jobs_done',
    });
    expect((await events(run, 'run.status')).filter((e) => e.status === 'done')).toHaveLength(1);
    expect((await events(run, 'group.status')).map((e) => [e.job_group_id, e.status]).sort()).toEqual([
      [1, 'success'],
      [2, 'success'],
    ]);
    // The completions were counted on several token rows of the root, which add up to the run's jobs.
    const rows: { token: number; n: number }[] = await t.dataSource.query(
      `SELECT token, n_completed AS n FROM job_group_counters
        WHERE run_id = $1 AND job_group_id = 0 AND n_completed > 0`,
      [run.id],
    );
    expect(rows.length).toBeGreaterThan(1);
    expect(rows.reduce((sum, r) => sum + r.n, 0)).toBe(30);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('the settle loop mends a status a process dying after its commit left behind', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const [share] = await startAll(run, 1, 1);
    await share.w.complete(share.held[0].id, DONE);
    const settler = t.app.get(RunStatusService);
    await settler.settled([run.id]);
    // As if the process had died between the completion's commit and its settle: the run still says running.
    await t.dataSource.query(
      `UPDATE runs SET status = 'running', status_message = NULL, termination_reason = NULL, finished_at = NULL
        WHERE id = $1`,
      [run.id],
    );
    expect((await invariants(t, admin)).mismatches).not.toEqual([]);
    const before = (await events(run, 'run.status')).length;
    // The loop walks unfinished runs a slice at a time; a few passes reach this one.
    for (let i = 0; i < 10 && (await t.http.get(runUrl(run)).set(owner.auth)).body.status !== 'done'; i++)
      await settler.settleUnfinished(500);
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body).toMatchObject({
      status: 'done',
      termination_reason: 'all_jobs_done',
    });
    expect((await events(run, 'run.status')).slice(before).map((e) => e.status)).toEqual(['done']);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
});
