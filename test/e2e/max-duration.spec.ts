import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';

describe('max_duration_s enforced by the server: overdue running submissions end max_duration_exceeded', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    // Its own database: another file's queued work ahead in a shared queue could fill the claims it makes.
    t = await createTestApp({}, { ownDatabase: 'maxdur' });
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const deadlines = async (ids: string[]) =>
    new Map(
      (
        await t.dataSource.query<{ id: string; seconds: number | null }[]>(
          `SELECT id, extract(epoch FROM deadline_at - started_at)::float8 AS seconds FROM job_submissions
             WHERE id = ANY($1)`,
          [ids],
        )
      ).map((r) => [r.id, r.seconds === null ? null : Number(r.seconds)]),
    );
  /** As if the submission had been running (and billed from) `seconds` ago and its deadline had just passed. */
  const overdue = async (id: string, seconds: number) => {
    await t.dataSource.query(
      `UPDATE job_submissions SET started_at = now() - make_interval(secs => $2),
                                  last_heartbeat_at = now() - make_interval(secs => $2),
              deadline_at = now() - interval '1 second' WHERE id = $1`,
      [id, seconds],
    );
    await t.dataSource.query(
      `UPDATE billing_attempts SET started_at = started_at - make_interval(secs => $2),
                                   rolled_up_to = rolled_up_to - make_interval(secs => $2)
        WHERE submission_id = $1`,
      [id, seconds],
    );
  };

  // The ended submission's worker is then refused (409 STALE_SUBMISSION).
  it('sets the deadline at running, ends only overdue submissions, bills them, never retries them', async () => {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['error', 'interruption', 'no_capacity'], max_attempts: 3 },
      jobs: [{ spec: jobSpec({ max_duration_s: 60 }) }, { spec: jobSpec() }],
    });
    const w = makeWorker(t, service, 'w-maxdur');
    const claimed = await claimFor(w, run.id, 2);
    expect(claimed).toHaveLength(2);
    for (const c of claimed) expect((await w.running(c.id)).status).toBe(200);
    const jobId = (n: number) =>
      required(
        run.jobs.find((j) => j.job_num === n),
        `job ${n}`,
      ).id;
    const limited = required(
      claimed.find((c) => c.job_id === jobId(0)),
      'the claimed job 0',
    );
    const unlimited = required(
      claimed.find((c) => c.job_id === jobId(1)),
      'the claimed job 1',
    );
    expect(await deadlines([limited.id, unlimited.id])).toEqual(
      new Map([
        [limited.id, 60],
        [unlimited.id, null],
      ]),
    );

    // Not yet past its deadline: nothing happens.
    const lifecycle = t.app.get(ServerTransitionsService);
    expect(await lifecycle.expireOverdue(100)).toBe(0);

    await overdue(limited.id, 61);
    expect(await lifecycle.expireOverdue(100)).toBe(1);
    expect(await lifecycle.expireOverdue(100)).toBe(0);

    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    const job = (n: number) => view.jobs.find((j: { job_num: number }) => j.job_num === n);
    expect(job(0)).toMatchObject({ status: 'terminated', submission_count: 1 });
    expect(job(0).latest_job_submission).toMatchObject({
      status: 'terminated',
      termination_reason: 'max_duration_exceeded',
    });
    expect(job(0).latest_job_submission.finished_at).not.toBeNull();
    expect(job(1).status).toBe('running');
    // Billed up to the end: 61 s of 1 core at 0.04 / core-hour and 1 GiB at 0.005 / GiB-hour, plus the test's own time.
    expect(job(0).latest_job_submission.cost_usd).toBeGreaterThanOrEqual((61 / 3600) * 0.045 - 1e-9);
    expect(job(0).latest_job_submission.cost_usd).toBeLessThan((70 / 3600) * 0.045);
    const root = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(root.counts).toEqual({
      n_jobs: 2,
      n_completed: 1,
      n_succeeded: 0,
      n_failed: 0,
      n_cancelled: 1,
      n_pending: 0,
    });

    // The silent worker's next report is refused as stale: it stops the process.
    const hb = await w.heartbeat(limited.id);
    expect(hb.status).toBe(409);
    expect(hb.body.code).toBe('STALE_SUBMISSION');

    expect((await w.complete(unlimited.id, { status: 'done', termination_reason: 'done_by_runner' })).status).toBe(200);
    expect((await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body.status).toBe('terminated');
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  it('ends at most `limit` submissions per pass, oldest deadline first', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec({ max_duration_s: 5 }), replicas: 3 }] });
    const w = makeWorker(t, service, 'w-maxdur-bound');
    const claimed = await claimFor(w, run.id, 3);
    expect(claimed).toHaveLength(3);
    for (const c of claimed) await w.running(c.id);
    for (const [i, c] of claimed.entries()) await overdue(c.id, 10 + i);
    // Deadlines passed 20, 40 and 30 seconds ago (not the order the submissions were made overdue in).
    const passedAgo = [20, 40, 30];
    for (const [i, c] of claimed.entries())
      await t.dataSource.query(
        `UPDATE job_submissions SET deadline_at = now() - make_interval(secs => $2) WHERE id = $1`,
        [c.id, passedAgo[i]],
      );
    const statusOf = async () =>
      (
        await t.dataSource.query<{ id: string; status: string; termination_reason: string | null }[]>(
          `SELECT id, status, termination_reason FROM job_submissions WHERE id = ANY($1)`,
          [claimed.map((c) => c.id)],
        )
      )
        .sort((a, b) => claimed.findIndex((c) => c.id === a.id) - claimed.findIndex((c) => c.id === b.id))
        .map((r) => `${r.status}/${r.termination_reason}`);
    const lifecycle = t.app.get(ServerTransitionsService);
    const ended = 'terminated/max_duration_exceeded';
    expect(await lifecycle.expireOverdue(2)).toBe(2);
    // The two oldest deadlines (40 and 30 s ago) went first; the one 20 s ago waits for the next pass.
    expect(await statusOf()).toEqual(['running/null', ended, ended]);
    expect(await lifecycle.expireOverdue(2)).toBe(1);
    expect(await statusOf()).toEqual([ended, ended, ended]);
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
});
