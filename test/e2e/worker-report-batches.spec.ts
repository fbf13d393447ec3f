import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WorkerReportsService } from '../../src/modules/lifecycle/worker-reports.service';
import { WorkerApi } from '../../src/worker/api';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';

interface Result {
  submission_id: string | null;
  kind: string | null;
  status_code: number;
  /** The route's answer (200) or its error. */
  body: Record<string, unknown> & { code?: string; details?: { field: string }[] };
}

/** A result's error code, null for 200. */
const codeOf = (r: Result) => (r.status_code === 200 ? null : (r.body.code ?? '?'));

/**
 * POST /internal/v1/submissions/reports: a worker's running, heartbeat and complete reports in one call, each
 * applied as its own route would, with a result each; one bad or stale report never fails the others.
 */
describe('batched worker reports', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let other: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    // Its own database: the invariants it checks look at every run.
    t = await createTestApp({}, { ownDatabase: 'reportbatch' });
    [owner, service, other, admin] = await Promise.all([
      t.user(),
      t.user('service'),
      t.user('service'),
      t.user('admin'),
    ]);
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const batch = (workerId: string, reports: unknown[], as = service) =>
    t.http.post('/internal/v1/submissions/reports').set(as.auth).send({ worker_id: workerId, reports });
  const statusOf = async (id: string) =>
    (await t.dataSource.query(`SELECT status, termination_reason FROM job_submissions WHERE id = $1`, [id]))[0];

  it('mixed valid, stale, duplicate, unknown and malformed reports: each gets its own answer', async () => {
    const run = await makeRun(t, owner, project, { priority: 50, jobs: [{ spec: jobSpec(), replicas: 3 }] });
    const workerId = uniqueName('w');
    const w = makeWorker(t, service, workerId);
    const [a, b, c] = await claimFor(w, run.id, 3);
    const done = { status: 'done', termination_reason: 'done_by_runner', exit_status: 0 };
    const res = await batch(workerId, [
      { submission_id: a.id, kind: 'running', provisioning_data: { host: 'h1' } },
      { submission_id: b.id, kind: 'running' },
      { submission_id: a.id, kind: 'heartbeat', runtime_data: { rss_mib: 10 } },
      { submission_id: a.id, kind: 'complete', ...done },
      { submission_id: a.id, kind: 'complete', ...done },
      { submission_id: c.id, kind: 'complete', ...done },
      { submission_id: randomUUID(), kind: 'heartbeat' },
      { submission_id: b.id, kind: 'teleport' },
      { submission_id: 'not-a-uuid', kind: 'running' },
      { submission_id: b.id, kind: 'complete', status: 'done', termination_reason: 'aborted_by_user' },
      { submission_id: b.id, kind: 'heartbeat', worker_id: 'someone-else' },
      { submission_id: b.id, kind: 'heartbeat', surprise: true },
    ]);
    expect(res.status).toBe(200);
    const results = res.body.results as Result[];
    expect(results.map((r) => [r.kind, r.status_code, codeOf(r)])).toEqual([
      ['running', 200, null],
      ['running', 200, null],
      ['heartbeat', 200, null],
      ['complete', 200, null],
      // A repeated report gets the first one's answer, as the single route's would.
      ['complete', 200, null],
      // c never reported running: done is not allowed from provisioning.
      ['complete', 409, 'TRANSITION_NOT_ALLOWED'],
      ['heartbeat', 404, 'NOT_FOUND'],
      ['teleport', 400, 'VALIDATION_FAILED'],
      ['running', 404, 'NOT_FOUND'],
      ['complete', 400, 'VALIDATION_FAILED'],
      ['heartbeat', 400, 'VALIDATION_FAILED'],
      ['heartbeat', 400, 'VALIDATION_FAILED'],
    ]);
    expect(results[0].body).toMatchObject({ status: 'running' });
    expect(results[3].body).toEqual(results[4].body);
    expect(results[3].body).toMatchObject({ submission_id: a.id, status: 'done', retry_submission: null });
    expect(results[9].body.details?.map((d) => d.field)).toEqual(['termination_reason']);
    expect(results[10].body.details?.map((d) => d.field)).toEqual(['worker_id']);
    expect(results[11].body.details?.map((d) => d.field)).toEqual(['surprise']);
    expect(results.map((r) => r.submission_id)).toEqual([
      a.id,
      b.id,
      a.id,
      a.id,
      a.id,
      c.id,
      expect.any(String),
      b.id,
      'not-a-uuid',
      b.id,
      b.id,
      b.id,
    ]);
    expect(await statusOf(a.id)).toEqual({ status: 'done', termination_reason: 'done_by_runner' });
    expect(await statusOf(b.id)).toEqual({ status: 'running', termination_reason: null });
    expect(await statusOf(c.id)).toEqual({ status: 'provisioning', termination_reason: null });
    const [row] = await t.dataSource.query(`SELECT provisioning_data FROM job_submissions WHERE id = $1`, [a.id]);
    expect(row.provisioning_data).toEqual({ host: 'h1' });

    // Another worker id of the account is stale; another account learns nothing (404), as on the single routes.
    const stale = await batch('w-other', [{ submission_id: b.id, kind: 'heartbeat' }]);
    expect((stale.body.results as Result[]).map((r) => [r.status_code, codeOf(r)])).toEqual([
      [409, 'STALE_SUBMISSION'],
    ]);
    const foreign = await batch(workerId, [{ submission_id: b.id, kind: 'heartbeat' }], other);
    expect((foreign.body.results as Result[]).map((r) => [r.status_code, codeOf(r)])).toEqual([[404, 'NOT_FOUND']]);

    // The same reports again change nothing and answer the same.
    const again = await batch(workerId, [{ submission_id: a.id, kind: 'complete', ...done }]);
    expect((again.body.results as Result[])[0]).toEqual(results[3]);
    for (const s of [b, c]) await w.execute(s, { status: 'done', termination_reason: 'done_by_runner' });
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it("the worker's client sends the reports due together as one batch, each settled as alone", async () => {
    const server = t.app.getHttpServer() as Server;
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const warnings: string[] = [];
    const api = new WorkerApi(url, service.token, uniqueName('w'), (m) => warnings.push(m));
    const run = await makeRun(t, owner, project, { priority: 60, jobs: [{ spec: jobSpec(), replicas: 3 }] });
    const claimed = (await api.claim({ cpu: 64, memory_mib: 100_000, gpu: 0 }, 3, 'docker')).filter(
      (c) => c.run_id === run.id,
    );
    expect(claimed).toHaveLength(3);
    const routeCount = async (route: string) => {
      const text = (await t.http.get('/metrics').expect(200)).text;
      const re = new RegExp(`runplane_http_request_duration_seconds_count\\{[^}]*route="${route}"[^}]*\\} (\\d+)`, 'g');
      return [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const batches = await routeCount('/internal/v1/submissions/reports');
    const singles = await routeCount('/internal/v1/submissions/:id/running');
    const forever = () => Date.now() + 60_000;
    const started = await Promise.all(claimed.map((c) => api.running(c.id, { host: 'h' }, forever)));
    expect(started).toEqual(['accepted', 'accepted', 'accepted']);
    expect(await routeCount('/internal/v1/submissions/reports')).toBe(batches + 1);
    expect(await routeCount('/internal/v1/submissions/:id/running')).toBe(singles);
    const done = { status: 'done', termination_reason: 'done_by_runner', exit_status: 0 } as const;
    const failed = { status: 'failed', termination_reason: 'container_exited_with_error', exit_status: 1 } as const;
    expect(await Promise.all(claimed.slice(0, 2).map((c) => api.complete(c.id, done, forever)))).toEqual([
      'accepted',
      'accepted',
    ]);
    // A report of an outcome other than the one recorded is refused (409), the other one in its batch accepted.
    expect(
      await Promise.all([api.complete(claimed[0].id, failed, forever), api.complete(claimed[2].id, done, forever)]),
    ).toEqual(['refused', 'accepted']);
    expect(await routeCount('/internal/v1/submissions/reports')).toBe(batches + 3);
    expect(warnings).toEqual([]);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it("a submission's reports, in calls sent back to back, take effect in the order sent", async () => {
    // Were a call's transaction to start while an earlier call's transaction holding the same submission is still in
    // flight, `complete`, alone in its transaction, would lock the submission first, and the heartbeat sent before
    // it (behind a `running` of another submission in its batch) would find it finished: a stale 409.
    const reports = t.app.get(WorkerReportsService);
    const run = await makeRun(t, owner, project, { priority: 70, jobs: [{ spec: jobSpec(), replicas: 24 }] });
    const workerId = uniqueName('w');
    const w = makeWorker(t, service, workerId);
    const claimed = await claimFor(w, run.id, 24);
    expect(claimed).toHaveLength(24);
    const [started, waiting] = [claimed.slice(0, 12), claimed.slice(12)];
    for (const c of started) await w.running(c.id);
    const principal = { userId: service.id, name: service.name, globalRole: 'service' as const };
    const body = { worker_id: workerId };
    const done = { ...body, status: 'done', termination_reason: 'done_by_runner', exit_status: 0 } as const;
    for (const [k, c] of started.entries()) {
      const [batched, completed] = await Promise.all([
        reports.batch(principal, workerId, [
          { kind: 'running', submissionId: waiting[k].id, body },
          { kind: 'heartbeat', submissionId: c.id, body },
        ]),
        reports.complete(principal, c.id, done),
      ]);
      expect(batched.map((o) => o.error?.code ?? null)).toEqual([null, null]);
      expect(batched[1].answer).toEqual(expect.objectContaining({ cancel_requested: false }));
      expect(completed).toEqual(expect.objectContaining({ submission_id: c.id, status: 'done' }));
      expect(await statusOf(c.id)).toEqual({ status: 'done', termination_reason: 'done_by_runner' });
    }
    for (const c of waiting) await w.execute(c, { status: 'done', termination_reason: 'done_by_runner' });
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('refuses a malformed batch as a whole: no reports, too many, a report that is not an object', async () => {
    const id = randomUUID();
    const one = { submission_id: id, kind: 'heartbeat' };
    const fields = async (reports: unknown, workerId: unknown = 'w-1') => {
      const res = await t.http
        .post('/internal/v1/submissions/reports')
        .set(service.auth)
        .send({ worker_id: workerId, reports });
      expect(res.status).toBe(400);
      return (res.body.details as { field: string }[]).map((d) => d.field);
    };
    expect(await fields([])).toEqual(['reports']);
    expect(await fields(Array.from({ length: 101 }, () => one))).toEqual(['reports']);
    expect(await fields([one, 'heartbeat'])).toEqual(['reports']);
    expect(await fields([one], 'bad id!')).toEqual(['worker_id']);
    const user = await t.http
      .post('/internal/v1/submissions/reports')
      .set(owner.auth)
      .send({ worker_id: 'w-1', reports: [one] });
    expect(user.status).toBe(403);
  });
});
