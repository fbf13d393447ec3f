import { ERROR } from '../../bench/reference-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { EntityManager } from 'typeorm';
import { ShardJobGroupCounters1766620800000 } from '../../migrations/1766620800000-ShardJobGroupCounters';
import { COUNTER_TOKENS } from '../../src/modules/job-groups/counter-tokens';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { claimFor, invariants, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';

/*
 * Bounded run views: job_counts by status from counters, at most jobs_limit jobs with jobs_truncated, and a list
 * page whose size follows its parameters, not what the runs hold. Its own database: the lifecycle part claims
 * whatever is queued, and the invariants check looks at every row.
 */

interface JobView {
  id: string;
  job_num: number;
  replica_num: number;
  status: string;
  job_submissions: unknown[];
}

interface RunView {
  id: string;
  status: string;
  job_counts: Record<string, number>;
  jobs: JobView[];
  jobs_truncated: boolean;
}

describe('bounded run views: job_counts, jobs_limit, jobs_truncated', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'bounded' });
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const runsUrl = () => `/api/v1/projects/${project}/runs`;
  const getRun = async (id: string, query: Record<string, unknown> = {}): Promise<RunView> =>
    (await t.http.get(`${runsUrl()}/${id}`).query(query).set(owner.auth).expect(200)).body;
  const listRuns = async (
    query: Record<string, unknown> = {},
    url = runsUrl(),
  ): Promise<{ items: RunView[]; next_cursor: string | null; bytes: number }> => {
    const res = await t.http.get(url).query(query).set(owner.auth).expect(200);
    return { ...res.body, bytes: Buffer.byteLength(res.text) };
  };
  /** Every job of a run through the paginated group listing: the ground truth job_counts must agree with. */
  const allJobs = async (id: string): Promise<JobView[]> => {
    const out: JobView[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: JobView[]; next_cursor: string | null } } = await t.http
        .get(`${runsUrl()}/${id}/job-groups/0/jobs`)
        .query({ recursive: true, limit: 100, ...(cursor ? { cursor } : {}) })
        .set(owner.auth)
        .expect(200);
      expect(res.body.items.length).toBeLessThanOrEqual(100);
      out.push(...res.body.items);
      cursor = res.body.next_cursor;
    } while (cursor);
    return out;
  };
  const tally = (jobs: JobView[]) => {
    const out: Record<string, number> = {};
    for (const j of jobs) out[j.status] = (out[j.status] ?? 0) + 1;
    return out;
  };
  const order = (jobs: JobView[]) => jobs.map((j) => [j.job_num, j.replica_num]);

  describe('a run of 250 jobs (3 entries with replicas)', () => {
    let run: RunView;
    let everyJob: JobView[];
    beforeAll(async () => {
      run = (await makeRun(t, owner, project, {
        jobs: [{ spec: jobSpec(), replicas: 120 }, { spec: jobSpec() }, { spec: jobSpec(), replicas: 129 }],
      })) as unknown as RunView;
      everyJob = await allJobs(run.id);
    });

    it('every job is reachable, once each, through job-groups/0/jobs?recursive=true pages of 100', () => {
      expect(everyJob).toHaveLength(250);
      expect(new Set(everyJob.map((j) => j.id)).size).toBe(250);
    });

    it('submission answers with the run view: all 250 jobs fit its default 1,000; counts by status', () => {
      expect(run.jobs).toHaveLength(250);
      expect(run).toMatchObject({ jobs_truncated: false, job_counts: { submitted: 250 } });
    });

    it('by default the list shows the first 100 jobs by (job_num, replica_num), truncated, all counted', async () => {
      const page = await listRuns({ limit: 1 });
      const item = page.items[0];
      expect(item.id).toBe(run.id);
      expect(item.jobs).toHaveLength(100);
      expect(order(item.jobs)).toEqual(order(everyJob.slice(0, 100)));
      expect(item.jobs.map((j) => j.id)).toEqual(everyJob.slice(0, 100).map((j) => j.id));
      expect(item).toMatchObject({ jobs_truncated: true, job_counts: { submitted: 250 } });
      const global = (await listRuns({ limit: 1 }, '/api/v1/runs')).items[0];
      expect(global).toMatchObject({ id: run.id, jobs_truncated: true, job_counts: { submitted: 250 } });
      expect(global.jobs).toHaveLength(100);
    });

    it('jobs_limit on the list: cut where asked, not truncated once every job fits', async () => {
      for (const [limit, shown, truncated] of [
        [1, 1, true],
        [121, 121, true],
        [249, 249, true],
        [250, 250, false],
        [10_000, 250, false],
      ] as const) {
        const item = (await listRuns({ limit: 1, jobs_limit: limit })).items[0];
        expect({ limit, shown: item.jobs.length, truncated: item.jobs_truncated }).toEqual({ limit, shown, truncated });
        expect(order(item.jobs)).toEqual(order(everyJob.slice(0, shown)));
      }
    });

    it('jobs_limit=0 and include_jobs=false: job_counts only, truncated because the run has jobs', async () => {
      for (const query of [{ jobs_limit: 0 }, { include_jobs: false }, { include_jobs: false, jobs_limit: 50 }]) {
        const item = (await listRuns({ limit: 1, ...query })).items[0];
        expect(item).toMatchObject({ id: run.id, jobs: [], jobs_truncated: true, job_counts: { submitted: 250 } });
      }
      expect(await getRun(run.id, { jobs_limit: 0 })).toMatchObject({
        jobs: [],
        jobs_truncated: true,
        job_counts: { submitted: 250 },
      });
    });

    it('GET one run: default 1,000 jobs, jobs_limit cuts it, job_submissions_limit still applies per job', async () => {
      const all = await getRun(run.id);
      expect(all.jobs).toHaveLength(250);
      expect(all.jobs_truncated).toBe(false);
      const ten = await getRun(run.id, { jobs_limit: 10, job_submissions_limit: 0 });
      expect(order(ten.jobs)).toEqual(order(everyJob.slice(0, 10)));
      expect(ten.jobs_truncated).toBe(true);
      for (const j of ten.jobs) expect(j.job_submissions).toEqual([]);
    });
  });

  it('a small run is never truncated, and its counts add up to its jobs', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 3 }] });
    expect(run).toMatchObject({ jobs_truncated: false, job_counts: { submitted: 3 } });
    expect(await getRun(run.id, { jobs_limit: 3 })).toMatchObject({ jobs_truncated: false });
    expect(await getRun(run.id, { jobs_limit: 2 })).toMatchObject({ jobs_truncated: true });
  });

  it("refuses jobs_limit outside 0..10,000 and one run's job_submissions_limit over 1,000, naming it", async () => {
    const run = await makeRun(t, owner, project);
    for (const url of [runsUrl(), '/api/v1/runs', `${runsUrl()}/${run.id}`]) {
      for (const bad of [10_001, 100_000, -1, 1.5, 'ten']) {
        const res = await t.http.get(url).query({ jobs_limit: bad }).set(owner.auth);
        expect({ url, bad, status: res.status, code: res.body.code }).toEqual({
          url,
          bad,
          status: 400,
          code: 'VALIDATION_FAILED',
        });
        expect(JSON.stringify(res.body)).toContain('jobs_limit');
      }
      await t.http.get(url).query({ jobs_limit: 10_000 }).set(owner.auth).expect(200);
      await t.http.get(url).query({ jobs_limit: 0 }).set(owner.auth).expect(200);
    }
    const tooDeep = await t.http.get(`${runsUrl()}/${run.id}`).query({ job_submissions_limit: 1001 }).set(owner.auth);
    expect(tooDeep.status).toBe(400);
    expect(JSON.stringify(tooDeep.body)).toContain('job_submissions_limit');
    await t.http.get(`${runsUrl()}/${run.id}`).query({ job_submissions_limit: 1000 }).set(owner.auth).expect(200);
  });

  it('job_counts stay exact through claims, running, outcomes, a group cancel with live jobs, an abort', async () => {
    const run = await makeRun(t, owner, project, {
      job_groups: [{ ref: 'g' }],
      jobs: [
        { spec: jobSpec(), replicas: 6 },
        { spec: jobSpec(), group_ref: 'g', replicas: 4 },
      ],
    });
    const url = `${runsUrl()}/${run.id}`;
    /** job_counts from GET and from the list agree with each other and with the jobs' statuses. */
    const counts = async (): Promise<Record<string, number>> => {
      const one = (await getRun(run.id, { jobs_limit: 0 })).job_counts;
      const listed = required(
        (await listRuns({ limit: 100, jobs_limit: 0 })).items.find((r) => r.id === run.id),
        'the run in the list',
      ).job_counts;
      expect(listed).toEqual(one);
      expect(one).toEqual(tally(await allJobs(run.id)));
      return one;
    };
    expect(await counts()).toEqual({ submitted: 10 });

    const w = makeWorker(t, service, 'w-bounded');
    const claimed = await claimFor(w, run.id, 10);
    expect(claimed).toHaveLength(10);
    expect(await counts()).toEqual({ provisioning: 10 });
    const root = claimed.filter((s) => s.job_group_id === 0);
    const inG = claimed.filter((s) => s.job_group_id !== 0);
    for (const s of [...root.slice(0, 4), ...inG.slice(0, 3)]) expect((await w.running(s.id)).status).toBe(200);
    expect(await counts()).toEqual({ provisioning: 3, running: 7 });

    expect(
      (await w.complete(root[0].id, { status: 'done', termination_reason: 'done_by_runner', exit_status: 0 })).status,
    ).toBe(200);
    expect((await w.complete(root[1].id, ERROR)).status).toBe(200);
    expect((await w.complete(root[2].id, { status: 'aborted', termination_reason: 'aborted_by_user' })).status).toBe(
      200,
    );
    expect(await counts()).toEqual({ provisioning: 3, running: 4, done: 1, failed: 1, aborted: 1 });

    // Cancelling g while 3 of its jobs run and 1 is provisioning: all 4 show as terminated at once.
    await t.http.post(`${url}/job-groups/1/cancel`).set(owner.auth).send({}).expect(200);
    expect(await counts()).toEqual({ provisioning: 2, running: 1, done: 1, failed: 1, aborted: 1, terminated: 4 });
    // A cancelled job's worker reporting the end changes nothing: it was counted when the group was cancelled.
    expect(
      (await w.complete(inG[0].id, { status: 'terminated', termination_reason: 'job_group_cancelled' })).status,
    ).toBe(200);
    expect(
      (await w.complete(inG[1].id, { status: 'done', termination_reason: 'done_by_runner', exit_status: 0 })).status,
    ).toBe(200);
    expect(await counts()).toEqual({ provisioning: 2, running: 1, done: 1, failed: 1, aborted: 1, terminated: 4 });

    // Aborting the run: what is left shows as aborted, whatever its workers are still doing.
    await t.http.post(`${url}/stop`).set(owner.auth).send({ abort: true }).expect(200);
    expect(await counts()).toEqual({ done: 1, failed: 1, aborted: 4, terminated: 4 });
    expect((await w.complete(root[3].id, { status: 'aborted', termination_reason: 'aborted_by_user' })).status).toBe(
      200,
    );
    expect(await counts()).toEqual({ done: 1, failed: 1, aborted: 4, terminated: 4 });
    const stopped = await getRun(run.id);
    expect(stopped.jobs_truncated).toBe(false);
    expect(stopped.jobs).toHaveLength(10);

    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });

  // Replayed over the rows the test above left (aborts, cancellations, counts spread over token rows).
  it('the migration spreading counters over token rows folds them back and spreads them again, sums kept', async () => {
    type Q = { query: (sql: string) => Promise<Record<string, unknown>[]> };
    const groups = (q: Q) =>
      q.query(
        `SELECT c.run_id, c.job_group_id, sum(n_jobs)::int AS jobs, sum(n_completed)::int AS completed,
                sum(n_succeeded)::int AS succeeded, sum(n_failed)::int AS failed, sum(n_cancelled)::int AS cancelled,
                sum(n_aborted)::int AS aborted, sum(n_always_run_open)::int AS open, sum(n_pending)::int AS pending,
                sum(n_provisioning)::int AS provisioning, sum(n_running)::int AS running,
                sum(n_retrying)::int AS retrying, bool_and(c.cancelled) AS flag
           FROM job_group_counters c GROUP BY c.run_id, c.job_group_id ORDER BY c.run_id, c.job_group_id`,
      );
    const statuses = (q: Q) =>
      q.query(`SELECT run_id, job_group_id, status FROM job_groups ORDER BY run_id, job_group_id`);
    const rows = async (q: Q) => Number((await q.query(`SELECT count(*) AS n FROM job_group_counters`))[0].n);
    const kept = await groups(t.dataSource);
    const keptStatuses = await statuses(t.dataSource);
    expect(kept.some((c) => (c.aborted as number) > 0)).toBe(true);
    const runner = t.dataSource.createQueryRunner();
    try {
      await runner.startTransaction();
      const migration = new ShardJobGroupCounters1766620800000();
      await migration.down(runner);
      expect(await rows(runner)).toBe(kept.length);
      expect(await groups(runner)).toEqual(kept);
      await migration.up(runner);
      expect(await rows(runner)).toBe(kept.length * COUNTER_TOKENS);
      expect(await groups(runner)).toEqual(kept);
      // The statuses the migration derives are those the settles recorded.
      expect(await statuses(runner)).toEqual(keptStatuses);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });

  it('a list page of big runs stays as small as one of runs of 100 jobs, and reads only what it shows', async () => {
    const other = (await makeProject(t, owner)).name;
    const submit = (replicas: number) => makeRun(t, owner, other, { jobs: [{ spec: jobSpec(), replicas }] });
    for (let i = 0; i < 3; i++) await submit(100);
    const pageOf = async () => {
      const res = await t.http.get(`/api/v1/projects/${other}/runs`).query({ limit: 3 }).set(owner.auth).expect(200);
      return { body: res.body as { items: RunView[] }, bytes: Buffer.byteLength(res.text) };
    };
    const hundred = await pageOf();
    for (let i = 0; i < 3; i++) await submit(5000);
    const big = await pageOf();
    for (const item of big.body.items)
      expect(item).toMatchObject({ jobs_truncated: true, job_counts: { submitted: 5000 } });
    expect(big.body.items.map((r) => r.jobs.length)).toEqual([100, 100, 100]);
    // Same number of jobs shown: same size within the few bytes of larger counts and different ids.
    expect(big.bytes).toBeLessThan(hundred.bytes * 1.05);

    // The statements behind the page read at most a page's worth of job rows (one more per run tells truncation):
    // the page's statements are replayed in order in one transaction (settings included), each one that reads jobs
    // under EXPLAIN ANALYZE, counting the rows its scans of jobs returned.
    const sent: [string, unknown[]][] = [];
    const original = EntityManager.prototype.query;
    const spy = jest.spyOn(EntityManager.prototype, 'query').mockImplementation(function (
      this: EntityManager,
      text: string,
      params?: unknown[],
    ) {
      sent.push([text, params ?? []]);
      return original.call(this, text, params);
    });
    try {
      await pageOf();
    } finally {
      spy.mockRestore();
    }
    expect(sent.some(([text]) => /\bFROM jobs\b/.test(text))).toBe(true);
    let scanned = 0;
    await t.dataSource.transaction(async (m) => {
      for (const [text, params] of sent) {
        if (/^\s*(SET|RESET)\b|\bset_config\(/.test(text)) await m.query(text, params);
        else if (/\bFROM jobs\b/.test(text)) {
          const [{ 'QUERY PLAN': plan }] = await m.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
          scanned += jobRowsScanned(plan[0].Plan);
          if (process.env.SHOW_PLANS) console.log(text, JSON.stringify(plan[0].Plan, null, 1));
        }
      }
    });
    expect(scanned).toBeGreaterThanOrEqual(3 * 100);
    expect(scanned).toBeLessThanOrEqual(3 * 101);
  });

  it('a billing report answers at most 100,000 rows: a bigger one is refused naming the range, never cut', async () => {
    const billed = await makeProject(t, owner);
    const [resource] = await t.dataSource.query(`SELECT id FROM resources ORDER BY id LIMIT 1`);
    // 100,001 days of usage written straight into the daily aggregate (and removed afterwards: no attempts back it).
    await t.dataSource.query(
      `INSERT INTO billing_daily_usage (project_id, user_id, day, resource_id, token, usage)
       SELECT $1, $2, date '1800-01-01' + i, $3, 0, 3600 FROM generate_series(0, 100000) AS i`,
      [billed.id, owner.id, resource.id],
    );
    try {
      const url = `/api/v1/projects/${billed.name}/billing`;
      const tooBig = await t.http
        .get(url)
        .query({ from: '1800-01-01', to: '2100-12-31', group_by: 'day' })
        .set(owner.auth);
      expect(tooBig.status).toBe(400);
      expect(tooBig.body).toMatchObject({ code: 'VALIDATION_FAILED', details: [{ field: 'to' }] });
      const justFits = await t.http
        .get(url)
        .query({ from: '1800-01-02', to: '2100-12-31', group_by: 'day' })
        .set(owner.auth)
        .expect(200);
      expect(justFits.body.items).toHaveLength(100_000);
      const byUser = await t.http
        .get(url)
        .query({ from: '1800-01-01', to: '2100-12-31', group_by: 'user' })
        .set(owner.auth)
        .expect(200);
      expect(byUser.body.items).toHaveLength(1);
    } finally {
      await t.dataSource.query(`DELETE FROM billing_daily_usage WHERE project_id = $1`, [billed.id]);
    }
  });
});

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  Plans?: PlanNode[];
}

/** Rows the plan's scans of `jobs` returned, over all their loops. */
function jobRowsScanned(node: PlanNode): number {
  const own = node['Relation Name'] === 'jobs' ? node['Actual Rows'] * node['Actual Loops'] : 0;
  return own + (node.Plans ?? []).reduce((n, p) => n + jobRowsScanned(p), 0);
}
