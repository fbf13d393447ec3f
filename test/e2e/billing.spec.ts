import { DONE } from '../../bench/reference-worker';
import type { Claimed, ReferenceWorker } from '../../bench/reference-worker';
import { BudgetService } from '../../src/modules/billing/budget.service';
import { ServerTransitionsService } from '../../src/modules/lifecycle/server-transitions.service';
import { jobSpec, makeGroupChain, makeProject, makeRun, RunResponse } from '../support/factories';
import { createTestApp, describeRealPostgres, TestApp, TestUser } from '../support/test-app';
import { BillingService } from '../../src/modules/billing/billing.service';
import { claimFor, invariants, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';
import { MetricsService } from '../../src/infra/metrics/metrics.service';

interface Cost {
  total_usd: number;
  running_usd: number;
  breakdown: { resource: string; usage: number; unit: string; cost_usd: number }[];
}

/** Seeded rates (migration CreateBillingTables): cpu 0.04 / core-hour, memory 0.005 / GiB-hour, gpu 1.0 / gpu-hour. */
const CPU = 0.04;
const MEM = 0.005;
/** jobSpec(): 1 core and 1 GiB. */
const PER_HOUR = CPU + MEM;
/**
 * Usage measured against rewound start times also includes the real seconds the test's own requests took (a loaded
 * CI machine: up to a second or two); it can never be less than the rewound time.
 */
const expectHours = (actual: number, hours: number, slackSeconds = 3) => {
  expect(actual).toBeGreaterThanOrEqual(hours - 1e-9);
  expect(actual).toBeLessThanOrEqual(hours + slackSeconds / 3600);
};

describe('billing: rates, accrual, rollups to every ancestor, exact cost, limits', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  let w: ReferenceWorker;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'billing' });
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
    w = makeWorker(t, service, 'w-billing');
  });
  afterEach(async () => {
    const report = await invariants(t, admin);
    expect(report.mismatches).toEqual([]);
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse, p = project) => `/api/v1/projects/${p}/runs/${run.id}`;
  const runCost = async (run: RunResponse, p = project) =>
    (
      await t.http
        .get(`${runUrl(run, p)}/cost`)
        .set(owner.auth)
        .expect(200)
    ).body as Cost;
  const groupCost = async (run: RunResponse, g: number) =>
    (
      await t.http
        .get(`${runUrl(run)}/job-groups/${g}/cost`)
        .set(owner.auth)
        .expect(200)
    ).body as Cost;
  const item = (c: Cost, resource: string) => c.breakdown.find((b) => b.resource === resource);
  const claimOf = async (run: RunResponse, n = 1): Promise<Claimed[]> => {
    const mine = await claimFor(w, run.id, n);
    expect(mine).toHaveLength(n);
    return mine;
  };
  /** Pretends the attempt started (and was last rolled up) `seconds` earlier: the next report accrues that much. */
  const rewind = (submissionId: string, seconds: number) =>
    t.dataSource.query(
      `UPDATE billing_attempts SET started_at = started_at - make_interval(secs => $2),
                                   rolled_up_to = rolled_up_to - make_interval(secs => $2) WHERE submission_id = $1`,
      [submissionId, seconds],
    );
  /** Exact closed usage of a run in unit-seconds per resource name, from the run aggregate (shards summed). */
  const runUsageSeconds = async (runId: string): Promise<Record<string, string>> => {
    const rows: { name: string; usage: string }[] = await t.dataSource.query(
      `SELECT r.name, SUM(u.usage)::text AS usage FROM billing_run_usage u JOIN resources r ON r.id = u.resource_id
         WHERE u.run_id = $1 GROUP BY r.name`,
      [runId],
    );
    return Object.fromEntries(rows.map((r) => [r.name, r.usage]));
  };
  const execute = async (s: Claimed, seconds: number) => {
    expect((await w.running(s.id)).status).toBe(200);
    await rewind(s.id, seconds);
    expect((await w.heartbeat(s.id)).status).toBe(200);
    expect((await w.complete(s.id, DONE)).status).toBe(200);
  };

  it('lists current rates; admins add a new version; others may not', async () => {
    const res = await t.http.get('/api/v1/resources').set(owner.auth).expect(200);
    expect(res.body.items).toEqual([
      expect.objectContaining({ name: 'cpu', unit: 'core-hour', rate_usd_per_unit_hour: CPU, version: 1 }),
      // Seeded by migration CreateRequestableResources, with the spec key disk_gib that bills it.
      expect.objectContaining({ name: 'disk', unit: 'GiB-hour', rate_usd_per_unit_hour: 0.0001, version: 1 }),
      expect.objectContaining({ name: 'gpu', unit: 'gpu-hour', rate_usd_per_unit_hour: 1, version: 1 }),
      expect.objectContaining({ name: 'memory', unit: 'GiB-hour', rate_usd_per_unit_hour: MEM, version: 1 }),
    ]);
    await t.http
      .post('/admin/v1/resources')
      .set(owner.auth)
      .send({ name: 'cpu', rate_usd_per_unit_hour: 1 })
      .expect(403);
    await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'cpu', rate_usd_per_unit_hour: -1 })
      .expect(400);
    // A resource no requestable key maps to could never be billed: refused, naming `name` (not a unit problem).
    const fresh = await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'tape', unit: 'GiB-hour', rate_usd_per_unit_hour: 0.0001 });
    expect(fresh.status).toBe(400);
    expect(fresh.body.code).toBe('VALIDATION_FAILED');
    expect(fresh.body.details).toEqual([expect.objectContaining({ field: 'name' })]);
    // A billed resource's unit is its requestable key's: another one is refused, naming `unit`.
    const wrongUnit = await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'disk', unit: 'TiB-hour', rate_usd_per_unit_hour: 0.0001 });
    expect(wrongUnit.status).toBe(400);
    expect(wrongUnit.body.details).toEqual([expect.objectContaining({ field: 'unit' })]);
    const disk = await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'disk', unit: 'GiB-hour', rate_usd_per_unit_hour: 0.0001 })
      .expect(201);
    expect(disk.body).toMatchObject({ name: 'disk', version: 2, unit: 'GiB-hour' });
    const disk2 = await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'disk', rate_usd_per_unit_hour: 0.0002 })
      .expect(201);
    expect(disk2.body).toMatchObject({ name: 'disk', version: 3, unit: 'GiB-hour', rate_usd_per_unit_hour: 0.0002 });
    const after = (await t.http.get('/api/v1/resources').set(owner.auth).expect(200)).body.items;
    expect(after.find((r: { name: string }) => r.name === 'disk')).toMatchObject({ version: 3 });
  });

  it('bills every ancestor: a group costs its subtree, the root the whole run, in the run view too', async () => {
    const run = await makeRun(t, owner, project);
    const [a, b] = await makeGroupChain(t, owner, project, run.id, 2);
    const [c] = await makeGroupChain(t, owner, project, run.id, 1);
    for (const g of [a, b, c])
      await t.http
        .post(`${runUrl(run)}/job-groups/${g}/jobs`)
        .set(owner.auth)
        .send({ jobs: [{ spec: jobSpec() }] })
        .expect(201);
    const seconds: Record<number, number> = { 0: 3600, [a]: 7200, [b]: 1800, [c]: 900 };
    for (const s of await claimOf(run, 4)) await execute(s, seconds[s.job_group_id]);

    const hours = (...gs: number[]) => gs.reduce((n, g) => n + seconds[g], 0) / 3600;
    const [root, ga, gb, gc, whole] = await Promise.all([
      groupCost(run, 0),
      groupCost(run, a),
      groupCost(run, b),
      groupCost(run, c),
      runCost(run),
    ]);
    expect(gb.total_usd).toBeCloseTo(hours(b) * PER_HOUR, 4);
    expect(ga.total_usd).toBeCloseTo(hours(a, b) * PER_HOUR, 4);
    expect(gc.total_usd).toBeCloseTo(hours(c) * PER_HOUR, 4);
    expect(root.total_usd).toBeCloseTo(hours(0, a, b, c) * PER_HOUR, 4);
    expectHours(required(item(ga, 'cpu'), 'the cpu item').usage, hours(a, b));
    expect(item(ga, 'memory')).toMatchObject({ unit: 'GiB-hour' });
    expect(item(ga, 'gpu')).toBeUndefined();
    // Closed usage only: nothing is running any more.
    expect(whole.running_usd).toBe(0);
    // Exactly the same rows, not sums across levels.
    expect(root).toEqual(whole);
    expect(root.total_usd).toBeCloseTo(ga.total_usd + gc.total_usd + hours(0) * PER_HOUR, 4);

    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    expect(view.cost).toEqual({ total_usd: whole.total_usd, breakdown: whole.breakdown });
    const listed = (await t.http.get(`/api/v1/projects/${project}/runs`).set(owner.auth).expect(200)).body.items.find(
      (r: { id: string }) => r.id === run.id,
    );
    expect(listed.cost).toEqual(view.cost);
    await t.http
      .get(`${runUrl(run)}/job-groups/99/cost`)
      .set(owner.auth)
      .expect(404);
    const stranger = await t.user();
    await t.http
      .get(`${runUrl(run)}/cost`)
      .set(stranger.auth)
      .expect(403);
  });

  it('is exact at read time: running work counts up to the request', async () => {
    const run = await makeRun(t, owner, project);
    const [s] = await claimOf(run);
    await w.running(s.id);
    await rewind(s.id, 3600);
    const live = await runCost(run);
    expect(live.total_usd).toBeCloseTo(PER_HOUR, 4);
    expect(live.running_usd).toBeCloseTo(PER_HOUR, 4);
    expect(await groupCost(run, 0)).toMatchObject({ running_usd: expect.closeTo(PER_HOUR, 4) });
    await w.heartbeat(s.id);
    const rolled = await runCost(run);
    expect(rolled.total_usd).toBeCloseTo(PER_HOUR, 4);
    expect(rolled.running_usd).toBeLessThan(0.001);
    await w.complete(s.id, DONE);
    expect((await runCost(run)).total_usd).toBeCloseTo(PER_HOUR, 4);
  });

  it('bills duplicate and out-of-order reports once', async () => {
    const run = await makeRun(t, owner, project);
    const [s] = await claimOf(run);
    await w.running(s.id);
    await rewind(s.id, 600);
    expect((await w.running(s.id)).status).toBe(200); // a repeated `running` pins nothing new
    await w.heartbeat(s.id);
    const once = await runUsageSeconds(run.id);
    expect(Number(once.cpu)).toBeCloseTo(600, 0);
    await w.heartbeat(s.id);
    expect(Number((await runUsageSeconds(run.id)).cpu) - Number(once.cpu)).toBeLessThan(1);

    // A report older than what is already rolled up (the rollup is an hour ahead of the clock) accrues nothing.
    await rewind(s.id, -3600);
    const ahead = await runUsageSeconds(run.id);
    await w.heartbeat(s.id);
    expect(await runUsageSeconds(run.id)).toEqual(ahead);
    expect((await runCost(run)).running_usd).toBe(0);
    await rewind(s.id, 3600);

    const done = await w.complete(s.id, DONE);
    const closed = await runUsageSeconds(run.id);
    expect(await w.complete(s.id, DONE)).toEqual(done);
    expect((await w.heartbeat(s.id)).status).toBe(409);
    // A late report after completion: even with the clock pushed back, nothing more accrues.
    await rewind(s.id, 3600);
    expect((await w.heartbeat(s.id)).status).toBe(409);
    expect((await w.complete(s.id, DONE)).status).toBe(200);
    await rewind(s.id, -3600);
    expect(await runUsageSeconds(run.id)).toEqual(closed);
    expect((await runCost(run)).running_usd).toBe(0);
  });

  it('stops the clock of a lapsed lease at its last heartbeat', async () => {
    const run = await makeRun(t, owner, project);
    const [s] = await claimOf(run);
    await w.running(s.id);
    await rewind(s.id, 300);
    await w.heartbeat(s.id);
    // 1000 s of silence after that heartbeat: shown as running cost while the lease holds...
    await rewind(s.id, 1000);
    expect((await runCost(run)).running_usd).toBeCloseTo((1000 / 3600) * PER_HOUR, 4);
    // ...but never billed once the lease lapses.
    await t.dataSource.query(
      `UPDATE job_submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`,
      [s.id],
    );
    await t.app.get(ServerTransitionsService).expireLapsedLeases(100);
    const cost = await runCost(run);
    expect(cost.running_usd).toBe(0);
    expectHours(required(item(cost, 'cpu'), 'the cpu item').usage, 300 / 3600);
  });

  it('splits per-day rows at UTC midnight; they add up to the run', async () => {
    const own = await makeProject(t, owner);
    const run = await makeRun(t, owner, own.name);
    const [s] = await claimOf(run);
    await w.running(s.id);
    // Started 23:00 UTC yesterday: the heartbeat's accrual spans midnight.
    await t.dataSource.query(
      `UPDATE billing_attempts
          SET started_at = (date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 hour') AT TIME ZONE 'UTC',
              rolled_up_to = (date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 hour') AT TIME ZONE 'UTC'
        WHERE submission_id = $1`,
      [s.id],
    );
    await w.heartbeat(s.id);
    await w.complete(s.id, DONE);
    const days: { day: string; name: string; usage: string }[] = await t.dataSource.query(
      `SELECT to_char(d.day, 'YYYY-MM-DD') AS day, r.name, SUM(d.usage)::text AS usage
         FROM billing_daily_usage d JOIN resources r ON r.id = d.resource_id
         JOIN billing_attempts a ON a.project_id = d.project_id AND a.user_id = d.user_id AND a.submission_id = $1
        WHERE d.day >= (now() AT TIME ZONE 'UTC')::date - 1
        GROUP BY d.day, r.name ORDER BY d.day, r.name`,
      [s.id],
    );
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    // Yesterday: exactly the hour before midnight (this project has no other usage that day).
    expect(days.filter((d) => d.day === yesterday)).toEqual([
      { day: yesterday, name: 'cpu', usage: expect.stringMatching(/^3600(\.0*)?$/) },
      { day: yesterday, name: 'memory', usage: expect.stringMatching(/^3600(\.0*)?$/) },
    ]);
    // The run's usage = its share of the day rows (exact numeric comparison in SQL).
    const [check] = await t.dataSource.query(
      `SELECT (SELECT SUM(usage) FROM billing_run_usage WHERE run_id = $1) =
              (SELECT SUM(usage) FROM billing_job_usage WHERE run_id = $1) AS same,
              (SELECT SUM(sr.quantity * EXTRACT(EPOCH FROM (a.rolled_up_to - a.started_at))) FROM billing_attempts a
               JOIN submission_resources sr USING (submission_id) WHERE a.submission_id = $2)
                = (SELECT SUM(usage) FROM billing_run_usage WHERE run_id = $1) AS exact`,
      [run.id, s.id],
    );
    expect(check).toEqual({ same: true, exact: true });
    // The project has only this run: its day rows (yesterday + today) add up to the run's usage.
    const [sums] = await t.dataSource.query(
      `SELECT (SELECT SUM(usage) FROM billing_daily_usage WHERE project_id = $1) =
              (SELECT SUM(usage) FROM billing_run_usage WHERE run_id = $2) AS same,
              (SELECT count(DISTINCT day) FROM billing_daily_usage WHERE project_id = $1)::int AS days`,
      [own.id, run.id],
    );
    expect(sums).toEqual({ same: true, days: 2 });
    const total = (await runCost(run, own.name)).breakdown.reduce((n, b) => n + b.usage, 0);
    expect(total).toBeCloseTo(days.reduce((n, d) => n + Number(d.usage), 0) / 3600, 6);
  });

  it('refuses new runs and jobs with 402 once a project is at its limit, running work included', async () => {
    const capped = await makeProject(t, owner, { billing_limit_usd: 0.01 });
    const run = await makeRun(t, owner, capped.name, { jobs: [{ spec: jobSpec() }, { spec: jobSpec() }] });
    const [s] = await claimOf(run);
    await w.running(s.id);
    await rewind(s.id, 3600); // 0.045 USD so far, none of it rolled up yet
    const refused = await t.http
      .post(`/api/v1/projects/${capped.name}/runs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] });
    expect(refused.status).toBe(402);
    expect(refused.body.code).toBe('BILLING_LIMIT_EXCEEDED');
    const jobs = await t.http
      .post(`${runUrl(run, capped.name)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] });
    expect(jobs.status).toBe(402);
    expect(jobs.body.code).toBe('BILLING_LIMIT_EXCEEDED');
    await w.complete(s.id, DONE);
    await t.http
      .post(`/api/v1/projects/${capped.name}/runs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(402);
    // Raising the limit lets work in again.
    await t.http.patch(`/api/v1/projects/${capped.name}`).set(owner.auth).send({ billing_limit_usd: 100 }).expect(200);
    await t.http
      .post(`${runUrl(run, capped.name)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(201);
    await makeRun(t, owner, capped.name);
  });

  it('bills each attempt at the rate pinned when it started; a rate change mid-run applies to later ones', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const [first] = await claimOf(run);
    await w.running(first.id);
    await rewind(first.id, 3600);
    await w.heartbeat(first.id);
    await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'cpu', rate_usd_per_unit_hour: 0.08 })
      .expect(201);
    // Still running across the change: its second hour keeps the rate it started with.
    await rewind(first.id, 3600);
    await w.complete(first.id, DONE);
    const before = await runCost(run);
    expect(item(before, 'cpu')?.cost_usd).toBeCloseTo(2 * CPU, 4);

    await t.http
      .post(`${runUrl(run)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(201);
    const [second] = await claimOf(run);
    await execute(second, 3600);
    const after = await runCost(run);
    // Three hours of cpu, plus the real seconds the test's own requests took (see expectHours).
    expectHours(required(item(after, 'cpu'), 'cpu item').usage, 3);
    expect(item(after, 'cpu')?.cost_usd).toBeCloseTo(2 * CPU + 0.08, 4);
    expect(item(after, 'memory')?.cost_usd).toBeCloseTo(3 * MEM, 4);
    expect(after.total_usd).toBeCloseTo(2 * CPU + 0.08 + 3 * MEM, 4);
    const pinned: { version: number }[] = await t.dataSource.query(
      `SELECT r.version FROM submission_resources sr JOIN resources r ON r.id = sr.resource_id
         WHERE sr.submission_id = ANY($1::uuid[]) AND r.name = 'cpu' ORDER BY r.version`,
      [[first.id, second.id]],
    );
    expect(pinned.map((p) => p.version)).toEqual([1, 2]);
  });

  it('stops a project’s active runs with budget_exceeded once its cost reaches the limit', async () => {
    const poor = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, poor, {
      priority: 900,
      job_groups: [{ ref: 'g' }],
      jobs: [{ spec: jobSpec() }, { group_ref: 'g', spec: jobSpec() }],
    });
    const [s] = await claimOf(run, 1);
    await w.running(s.id);
    await rewind(s.id, 3600);
    await w.heartbeat(s.id);
    await t.http.patch(`/api/v1/projects/${poor}`).set(owner.auth).send({ billing_limit_usd: 0.01 }).expect(200);
    const enforcer = t.app.get(BudgetService);
    let stopped = 0;
    for (let i = 0; i < 20 && stopped === 0; i++) stopped += await enforcer.enforce(1000);
    expect(stopped).toBe(1);
    const view = (await t.http.get(runUrl(run, poor)).set(owner.auth).expect(200)).body;
    expect(view).toMatchObject({ status: 'terminating', termination_reason: 'budget_exceeded' });
    const group = (
      await t.http
        .get(`${runUrl(run, poor)}/job-groups/1`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(group).toMatchObject({
      status: 'cancelled',
      cancellation: { job_group_id: 0, cancelled_by: 'system', reason: 'budget_exceeded' },
    });
    const queued = view.jobs.find((j: { id: string }) => j.id !== s.job_id);
    expect(queued).toMatchObject({ status: 'terminated', termination_reason: 'budget_exceeded' });
    expect((await w.heartbeat(s.id)).body.cancel_requested).toBe(true);
    await w.complete(s.id, { status: 'terminated', termination_reason: 'budget_exceeded' });
    await t.app.get(ServerTransitionsService).sweepCancelled(100, 1000);
    expect((await t.http.get(runUrl(run, poor)).set(owner.auth).expect(200)).body).toMatchObject({
      status: 'terminated',
      termination_reason: 'budget_exceeded',
    });
  });

  it('reports usage and cost by user, day and resource; totals match the run costs', async () => {
    const p = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, p, { priority: 900 });
    const [s] = await claimOf(run, 1);
    await execute(s, 7200);
    const today = new Date().toISOString().slice(0, 10);
    const url = `/api/v1/projects/${p}/billing`;
    const byAll = (
      await t.http
        .get(url)
        .set(owner.auth)
        .query({ from: '2000-01-01', to: today, group_by: 'user,day,resource' })
        .expect(200)
    ).body.items;
    // Two hours back from just after midnight UTC spans two days: one cpu row per day, summing to 2 core-hours.
    const cpuRows = byAll.filter((r: { resource: string }) => r.resource === 'cpu');
    expect(cpuRows.length).toBeGreaterThanOrEqual(1);
    expect(cpuRows.length).toBeLessThanOrEqual(2);
    for (const row of cpuRows) expect(row).toMatchObject({ user: owner.name, unit: expect.any(String) });
    const cpuUsage = cpuRows.reduce((sum: number, r: { usage: number }) => sum + r.usage, 0);
    expect(cpuUsage).toBeCloseTo(2, 2);
    const total = (
      await t.http.get(url).set(owner.auth).query({ from: '2000-01-01', to: today, group_by: 'user' }).expect(200)
    ).body.items;
    expect(total).toHaveLength(1);
    expect(total[0].cost_usd).toBeCloseTo((await runCost(run, p)).total_usd, 8);
    expect(total[0].usage).toBeUndefined();
    for (const bad of [
      { from: 'yesterday', to: today },
      { from: today },
      { from: today, to: today, group_by: 'team' },
      { from: today, to: '2000-01-01' },
    ]) {
      await t.http.get(url).set(owner.auth).query(bad).expect(400);
    }
    const outsider = await t.user();
    await t.http.get(url).set(outsider.auth).query({ from: today, to: today }).expect(403);
  });

  it('compacts token shards without changing any total (maintenance clean-up)', async () => {
    const run = await makeRun(t, owner, project, { priority: 900 });
    const [s] = await claimOf(run, 1);
    await w.running(s.id);
    for (let i = 0; i < 6; i++) {
      await rewind(s.id, 60);
      await w.heartbeat(s.id);
    }
    await w.complete(s.id, DONE);
    const before = await runUsageSeconds(run.id);
    const rowsOf = async () =>
      (
        await t.dataSource.query(
          `SELECT (SELECT count(*) FROM billing_run_usage WHERE run_id = $1)::int AS run,
                  (SELECT count(*) FROM billing_group_usage WHERE run_id = $1)::int AS grp,
                  (SELECT count(DISTINCT token) FROM billing_run_usage WHERE run_id = $1)::int AS tokens`,
          [run.id],
        )
      )[0] as { run: number; grp: number; tokens: number };
    const spread = await rowsOf();
    // Seven accruals on random tokens of 64: the run's usage really is spread (two resources, several tokens each).
    expect(spread.tokens).toBeGreaterThan(1);
    expect(spread.run).toBeGreaterThan(Object.keys(before).length);
    const report = (await t.http.post('/admin/v1/maintenance/cleanup').set(admin.auth).expect(200)).body;
    expect(report).toMatchObject({
      shard_rows_compacted: expect.any(Number),
      lapsed_leases_expired: expect.any(Number),
    });
    expect(await runUsageSeconds(run.id)).toEqual(before);
    // Folded: one row per resource on token 0, for the run and for its root group alike.
    const resources = Object.keys(before).length;
    expect(await rowsOf()).toEqual({ run: resources, grp: resources, tokens: 1 });
    expect(report.shard_rows_compacted).toBeGreaterThanOrEqual(spread.run - resources + (spread.grp - resources));
    await t.http.post('/admin/v1/maintenance/cleanup').set(owner.auth).expect(403);
  });

  describeRealPostgres('compaction racing an accrual (concurrent transactions)', () => {
    it('an accrual adding a token-0 row while compaction folds that row set: folded in, total kept', async () => {
      const runId = '00000000-0000-4000-8000-' + String(Date.now()).slice(-12).padStart(12, '0');
      const [{ id: cpu }] = await t.dataSource.query(`SELECT id FROM resources WHERE name = 'cpu' LIMIT 1`);
      await t.dataSource.query(
        `INSERT INTO billing_run_usage (run_id, resource_id, token, usage) VALUES ($1, $2, 1, 10), ($1, $2, 2, 20)`,
        [runId, cpu],
      );
      // The accrual's transaction inserts token 0 and stays open while compaction runs (it waits on that row).
      const accrual = t.dataSource.createQueryRunner();
      await accrual.connect();
      try {
        await accrual.startTransaction();
        await accrual.query(`INSERT INTO billing_run_usage (run_id, resource_id, token, usage) VALUES ($1, $2, 0, 5)`, [
          runId,
          cpu,
        ]);
        const compaction = t.app.get(BillingService).compactShards(1_000_000);
        await new Promise((r) => setTimeout(r, 300));
        await accrual.commitTransaction();
        await compaction; // refused before: 23505 on pk_billing_run_usage (a 409 from the maintenance route)
      } finally {
        await accrual.release();
      }
      const rows = await t.dataSource.query(
        `SELECT token, usage::int AS usage FROM billing_run_usage WHERE run_id = $1 ORDER BY token`,
        [runId],
      );
      expect(rows).toEqual([{ token: 0, usage: 35 }]);
      await t.dataSource.query(`DELETE FROM billing_run_usage WHERE run_id = $1`, [runId]);
    });

    it('compaction passes beside a stream of accruals: every pass succeeds, every second is kept', async () => {
      const runId = '00000000-0000-4000-9000-' + String(Date.now()).slice(-12).padStart(12, '0');
      const [{ id: cpu }] = await t.dataSource.query(`SELECT id FROM resources WHERE name = 'cpu' LIMIT 1`);
      // Accruals as the billing statements write them: a random token's row inserted or added to, committed each.
      let stop = false;
      let accrued = 0;
      const accruer = async () => {
        const runner = t.dataSource.createQueryRunner();
        await runner.connect();
        try {
          while (!stop) {
            await runner.query(
              `INSERT INTO billing_run_usage AS u (run_id, resource_id, token, usage) VALUES ($1, $2, $3, 1)
               ON CONFLICT (run_id, resource_id, token) DO UPDATE SET usage = u.usage + 1`,
              [runId, cpu, Math.floor(Math.random() * 8)],
            );
            accrued++;
          }
        } finally {
          await runner.release();
        }
      };
      const accruers = [accruer(), accruer(), accruer()];
      // Under REPEATABLE READ a pass met a serialization failure on nearly every try while accruals kept coming
      // (a 503 from the maintenance route under the 3-instance workload); the DELETE now follows their updates.
      const retries = () => t.app.get(MetricsService).transactionRetries.get();
      const before = (await retries()).values.reduce((sum, v) => sum + v.value, 0);
      try {
        for (let pass = 0; pass < 10; pass++) {
          await t.app.get(BillingService).compactShards(1_000_000);
          await new Promise((r) => setTimeout(r, 10));
        }
      } finally {
        stop = true;
        await Promise.all(accruers);
      }
      expect((await retries()).values.reduce((sum, v) => sum + v.value, 0) - before).toBe(0);
      const [{ total }] = await t.dataSource.query(
        `SELECT SUM(usage)::int AS total FROM billing_run_usage WHERE run_id = $1`,
        [runId],
      );
      expect(accrued).toBeGreaterThan(50);
      expect(total).toBe(accrued);
      await t.dataSource.query(`DELETE FROM billing_run_usage WHERE run_id = $1`, [runId]);
    });
  });

  it('shows costs in group views, and per submission in run, list, group-jobs and history responses', async () => {
    const run = await makeRun(t, owner, project, {
      priority: 900,
      job_groups: [{ ref: 'g' }],
      jobs: [{ group_ref: 'g', spec: jobSpec() }],
    });
    const [s] = await claimOf(run, 1);
    await execute(s, 3600);
    // An hour of one job; the rates are whatever earlier tests left current, so take the run's own total.
    const expected = (await runCost(run)).total_usd;
    expect(expected).toBeGreaterThanOrEqual(PER_HOUR * 0.99);
    const group = (
      await t.http
        .get(`${runUrl(run)}/job-groups/1`)
        .set(owner.auth)
        .expect(200)
    ).body;
    expect(group.cost.total_usd).toBeCloseTo(expected, 4);
    const children = (
      await t.http
        .get(`${runUrl(run)}/job-groups/0/job-groups`)
        .set(owner.auth)
        .expect(200)
    ).body.items;
    expect(children[0].cost.total_usd).toBeCloseTo(expected, 4);
    const view = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    expect(view.jobs[0].job_submissions[0].cost_usd).toBeCloseTo(expected, 4);
    expect(view.jobs[0].latest_job_submission.cost_usd).toBeCloseTo(expected, 4);
    const listed = (
      await t.http.get(`/api/v1/projects/${project}/runs`).set(owner.auth).query({ limit: 100 }).expect(200)
    ).body.items.find((r: { id: string }) => r.id === run.id);
    expect(listed.jobs[0].job_submissions[0].cost_usd).toBeCloseTo(expected, 4);
    const groupJobs = (
      await t.http
        .get(`${runUrl(run)}/job-groups/1/jobs`)
        .set(owner.auth)
        .expect(200)
    ).body.items;
    expect(groupJobs[0].latest_job_submission.cost_usd).toBeCloseTo(expected, 4);
    const history = (
      await t.http
        .get(`${runUrl(run)}/jobs/${s.job_id}/submissions`)
        .set(owner.auth)
        .expect(200)
    ).body.items;
    expect(history[0].cost_usd).toBeCloseTo(expected, 4);
  });
});
