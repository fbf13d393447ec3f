import { COUNTER_TOKENS } from '../../src/modules/job-groups/counter-tokens';
import { JobGroupsService } from '../../src/modules/job-groups/job-groups.service';
import { rowCounts } from '../support/input-errors';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { jobSpec, makeGroupChain, makeProject, makeRun, RunResponse } from '../support/factories';

describe('job groups: tree, counts, cancellation', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const runUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}`;
  const group = async (run: RunResponse, g: number) =>
    (
      await t.http
        .get(`${runUrl(run)}/job-groups/${g}`)
        .set(owner.auth)
        .expect(200)
    ).body;
  const addJobs = (run: RunResponse, g: number, n = 1) =>
    t.http
      .post(`${runUrl(run)}/job-groups/${g}/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec(), replicas: n }] });
  const cancel = (run: RunResponse, g: number, reason?: string) =>
    t.http
      .post(`${runUrl(run)}/job-groups/${g}/cancel`)
      .set(owner.auth)
      .send(reason ? { reason } : {});
  const jobsOf = async (run: RunResponse, g: number, query: Record<string, string | number | boolean> = {}) =>
    (
      await t.http
        .get(`${runUrl(run)}/job-groups/${g}/jobs`)
        .set(owner.auth)
        .query({ limit: 100, ...query })
        .expect(200)
    ).body.items as {
      id: string;
      job_group_id: number;
      status: string;
      termination_reason: string | null;
      cancelled_job_group_id: number | null;
    }[];

  it('nests to depth 5 and refuses a sixth level with 400 MAX_DEPTH_EXCEEDED', async () => {
    const run = await makeRun(t, owner, project);
    const chain = await makeGroupChain(t, owner, project, run.id, 5);
    expect((await group(run, chain[4])).depth).toBe(5);
    const res = await t.http
      .post(`${runUrl(run)}/job-groups`)
      .set(owner.auth)
      .send({ parent_id: chain[4] })
      .expect(400);
    expect(res.body.code).toBe('MAX_DEPTH_EXCEEDED');
    const closure = await t.dataSource.query(
      'SELECT count(*)::int AS n FROM job_group_self_and_ancestors WHERE run_id = $1',
      [run.id],
    );
    expect(closure[0].n).toBe(1 + 2 + 3 + 4 + 5 + 6);
    await t.http
      .post(`${runUrl(run)}/job-groups`)
      .set(owner.auth)
      .send({ parent_id: 999 })
      .expect(404);
  });

  it('counts jobs added at several depths in every ancestor, and lists children', async () => {
    const run = await makeRun(t, owner, project);
    const [a, b, c] = await makeGroupChain(t, owner, project, run.id, 3);
    const [side] = await makeGroupChain(t, owner, project, run.id, 1);
    expect((await addJobs(run, c, 2)).status).toBe(201);
    expect((await addJobs(run, a, 3)).status).toBe(201);
    const added = await addJobs(run, side, 4);
    expect(added.body.jobs).toHaveLength(4);
    expect(added.body.jobs.map((j: { job_num: number }) => j.job_num)).toEqual([3, 3, 3, 3]);
    expect((await group(run, 0)).counts.n_jobs).toBe(1 + 2 + 3 + 4);
    expect((await group(run, a)).counts.n_jobs).toBe(5);
    expect((await group(run, b)).counts.n_jobs).toBe(2);
    expect((await group(run, c)).counts.n_jobs).toBe(2);
    expect((await group(run, side)).counts.n_jobs).toBe(4);
    const children = await t.http
      .get(`${runUrl(run)}/job-groups/0/job-groups`)
      .set(owner.auth)
      .expect(200);
    expect(children.body.items.map((g: { job_group_id: number }) => g.job_group_id)).toEqual([a, side]);
    expect((await jobsOf(run, a)).length).toBe(3);
    expect((await jobsOf(run, a, { recursive: true })).length).toBe(5);
    expect((await jobsOf(run, 0, { recursive: true })).length).toBe(10);
  });

  it('cancels down, never up or sideways, with O(depth) writes and effective statuses', async () => {
    const run = await makeRun(t, owner, project);
    const [a, b, c] = await makeGroupChain(t, owner, project, run.id, 3);
    const [side] = await makeGroupChain(t, owner, project, run.id, 1);
    await addJobs(run, b, 2);
    await addJobs(run, c, 3);
    await addJobs(run, side, 1);
    const jobRowsBefore = await t.dataSource.query(
      'SELECT id, status, termination_reason FROM jobs WHERE run_id = $1 ORDER BY id',
      [run.id],
    );
    const res = await cancel(run, b, 'enough').expect(200);
    expect(res.body).toMatchObject({ job_group_id: b, cancelled_by: owner.name, reason: 'enough' });
    // nothing in the subtree was written: job rows are as they were
    expect(
      await t.dataSource.query('SELECT id, status, termination_reason FROM jobs WHERE run_id = $1 ORDER BY id', [
        run.id,
      ]),
    ).toEqual(jobRowsBefore);
    expect(
      await t.dataSource.query('SELECT job_group_id FROM job_groups_cancelled WHERE run_id = $1', [run.id]),
    ).toEqual([{ job_group_id: b }]);

    for (const g of [b, c]) {
      const view = await group(run, g);
      expect(view).toMatchObject({
        status: 'cancelled',
        state: 'complete',
        cancellation: { job_group_id: b, reason: 'enough' },
      });
      expect(view.counts.n_cancelled).toBe(view.counts.n_jobs);
    }
    // every job of a is in b's subtree: a is complete with cancellations, but was not itself cancelled
    expect(await group(run, a)).toMatchObject({
      status: 'cancelled',
      cancellation: null,
      counts: { n_jobs: 5, n_cancelled: 5, n_completed: 5 },
    });
    expect(await group(run, side)).toMatchObject({
      status: 'running',
      cancellation: null,
      counts: { n_jobs: 1, n_cancelled: 0 },
    });
    expect(await group(run, 0)).toMatchObject({
      status: 'running',
      counts: { n_jobs: 7, n_completed: 5, n_cancelled: 5 },
    });

    const cancelled = await jobsOf(run, b, { recursive: true });
    expect(cancelled).toHaveLength(5);
    for (const j of cancelled)
      expect(j).toMatchObject({
        status: 'terminated',
        termination_reason: 'job_group_cancelled',
        cancelled_job_group_id: b,
      });
    expect((await jobsOf(run, 0, { recursive: true, status: 'terminated' })).length).toBe(5);
    expect((await jobsOf(run, 0, { recursive: true, status: 'submitted' })).map((j) => j.job_group_id).sort()).toEqual([
      0,
      side,
    ]);
    const runView = (await t.http.get(runUrl(run)).set(owner.auth).expect(200)).body;
    expect(runView.status).toBe('submitted');
  });

  it('refuses groups and jobs in a cancelled group (409 GROUP_CANCELLED); repeats get the first record', async () => {
    const run = await makeRun(t, owner, project);
    const [a, b] = await makeGroupChain(t, owner, project, run.id, 2);
    const first = await cancel(run, a, 'first').expect(200);
    const again = await cancel(run, a, 'second').expect(200);
    expect(again.body).toEqual(first.body);
    const fromBelow = await cancel(run, b, 'below').expect(200);
    expect(fromBelow.body).toEqual(first.body);
    for (const g of [a, b]) {
      const r1 = await addJobs(run, g);
      expect(r1.status).toBe(409);
      expect(r1.body.code).toBe('GROUP_CANCELLED');
      const r2 = await t.http
        .post(`${runUrl(run)}/job-groups`)
        .set(owner.auth)
        .send({ parent_id: g })
        .expect(409);
      expect(r2.body.code).toBe('GROUP_CANCELLED');
    }
    expect((await group(run, a)).counts.n_jobs).toBe(0);
    expect(
      await t.dataSource.query('SELECT count(*)::int AS n FROM job_groups_cancelled WHERE run_id = $1', [run.id]),
    ).toEqual([{ n: 1 }]);
  });

  it('a cancelled descendant and then its cancelled ancestor coexist, counted once', async () => {
    const run = await makeRun(t, owner, project);
    const [a, b] = await makeGroupChain(t, owner, project, run.id, 2);
    await addJobs(run, a, 2);
    await addJobs(run, b, 3);
    await cancel(run, b, 'inner').expect(200);
    expect(await group(run, a)).toMatchObject({ counts: { n_jobs: 5, n_cancelled: 3, n_completed: 3 } });
    const outer = await cancel(run, a, 'outer').expect(200);
    expect(outer.body).toMatchObject({ job_group_id: a, reason: 'outer' });
    expect(await group(run, a)).toMatchObject({
      status: 'cancelled',
      counts: { n_jobs: 5, n_cancelled: 5, n_completed: 5 },
    });
    expect(await group(run, b)).toMatchObject({
      status: 'cancelled',
      cancellation: { job_group_id: b, reason: 'inner' },
      counts: { n_cancelled: 3 },
    });
    expect(await group(run, 0)).toMatchObject({ counts: { n_jobs: 6, n_cancelled: 5, n_completed: 5 } });
    const inner = await jobsOf(run, b);
    for (const j of inner) expect(j.cancelled_job_group_id).toBe(b);
    const outerJobs = await jobsOf(run, a);
    for (const j of outerJobs) expect(j.cancelled_job_group_id).toBe(a);
  });

  it('stopping the run after a subtree was cancelled counts every job once', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 2 }] });
    const [a] = await makeGroupChain(t, owner, project, run.id, 1);
    await addJobs(run, a, 3);
    await cancel(run, a).expect(200);
    const stopped = await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({})
      .expect(200);
    expect(stopped.body.status).toBe('terminated');
    expect(await group(run, 0)).toMatchObject({
      status: 'cancelled',
      counts: { n_jobs: 5, n_completed: 5, n_cancelled: 5 },
    });
  });

  it('refuses bad input on every group route with 4xx and writes nothing', async () => {
    const run = await makeRun(t, owner, project);
    const before = await t.dataSource.query(
      'SELECT (SELECT count(*) FROM job_groups WHERE run_id = $1)::int AS g, ' +
        '(SELECT count(*) FROM jobs WHERE run_id = $1)::int AS j',
      [run.id],
    );
    const url = runUrl(run);
    const bad: [string, string, unknown, number][] = [
      ['post', `${url}/job-groups`, {}, 400],
      ['post', `${url}/job-groups`, { parent_id: -1 }, 400],
      ['post', `${url}/job-groups`, { parent_id: 'zero' }, 400],
      ['post', `${url}/job-groups`, { parent_id: 0, extra: 1 }, 400],
      ['post', `${url}/job-groups`, { parent_id: 0, cancel_after_n_failures: 0 }, 400],
      ['post', `${url}/job-groups`, { parent_id: 0, attributes: 'x' }, 400],
      ['post', `${url}/job-groups/0/jobs`, {}, 400],
      ['post', `${url}/job-groups/0/jobs`, { jobs: [] }, 400],
      ['post', `${url}/job-groups/0/jobs`, { jobs: [{ spec: jobSpec(), group_ref: 'x' }] }, 400],
      ['post', `${url}/job-groups/0/jobs`, { jobs: [{ spec: { commands: ['x'] } }] }, 400],
      ['post', `${url}/job-groups/abc/jobs`, { jobs: [{ spec: jobSpec() }] }, 400],
      ['post', `${url}/job-groups/77/jobs`, { jobs: [{ spec: jobSpec() }] }, 404],
      ['post', `${url}/job-groups/0/cancel`, { reason: 5 }, 400],
      ['post', `${url}/job-groups/0/cancel`, { reason: 'x'.repeat(300) }, 400],
      ['post', `${url}/job-groups/0/cancel`, { other: 1 }, 400],
      ['post', `${url}/job-groups/42/cancel`, {}, 404],
      ['get', `${url}/job-groups/-1`, undefined, 400],
      ['get', `${url}/job-groups/99999999999`, undefined, 400],
      ['get', `${url}/job-groups/9`, undefined, 404],
      ['get', `${url}/job-groups/0/jobs?status=sleeping`, undefined, 400],
      ['get', `${url}/job-groups/0/jobs?recursive=maybe`, undefined, 400],
      ['get', `${url}/job-groups/0/jobs?cursor=zzz`, undefined, 400],
      ['get', `${url}/job-groups/0/job-groups?limit=0`, undefined, 400],
    ];
    for (const [method, path, body, status] of bad) {
      const req =
        method === 'post'
          ? t.http
              .post(path)
              .set(owner.auth)
              .send(body as object)
          : t.http.get(path).set(owner.auth);
      const res = await req;
      expect({ path, body, status: res.status }).toEqual({ path, body, status });
      expect(res.body.code).toEqual(expect.any(String));
    }
    const after = await t.dataSource.query(
      'SELECT (SELECT count(*) FROM job_groups WHERE run_id = $1)::int AS g, ' +
        '(SELECT count(*) FROM jobs WHERE run_id = $1)::int AS j',
      [run.id],
    );
    expect(after).toEqual(before);
    expect(
      await t.dataSource.query('SELECT count(*)::int AS n FROM job_groups_cancelled WHERE run_id = $1', [run.id]),
    ).toEqual([{ n: 0 }]);
  });

  it('paginates a group’s jobs without skips or repeats', async () => {
    const run = await makeRun(t, owner, project, {
      jobs: [
        { spec: jobSpec(), replicas: 3 },
        { spec: jobSpec(), replicas: 4 },
      ],
    });
    const seen: string[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: { id: string }[]; next_cursor: string | null } } = await t.http
        .get(`${runUrl(run)}/job-groups/0/jobs`)
        .set(owner.auth)
        .query(cursor ? { limit: 2, cursor } : { limit: 2 })
        .expect(200);
      seen.push(...res.body.items.map((j) => j.id));
      sizes.push(res.body.items.length);
      cursor = res.body.next_cursor;
    } while (cursor);
    // Every job once, in (job_num, replica_num) order, as the run view lists them.
    expect(seen).toEqual(run.jobs.map((j) => j.id));
    expect(run.jobs.map((j) => [j.job_num, j.replica_num])).toEqual([
      [0, 0],
      [0, 1],
      [0, 2],
      [1, 0],
      [1, 1],
      [1, 2],
      [1, 3],
    ]);
    expect(sizes).toEqual([2, 2, 2, 1]);
  });

  it('submits 10,000 jobs in one request, all their rows written by one transaction', async () => {
    const res = await t.http
      .post(`/api/v1/projects/${project}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', uniqueName('big'))
      .send({
        job_groups: [{ ref: 'g' }],
        jobs: [
          { spec: jobSpec(), replicas: 5000 },
          { spec: jobSpec(), group_ref: 'g', replicas: 5000 },
        ],
      })
      .expect(201);
    // The run view shows the first 1,000 jobs (its default jobs_limit) and counts them all.
    expect(res.body.jobs).toHaveLength(1000);
    expect(res.body).toMatchObject({ jobs_truncated: true, job_counts: { submitted: 10_000 } });
    expect(
      (await t.http.get(`/api/v1/projects/${project}/runs/${res.body.id}/job-groups/0`).set(owner.auth).expect(200))
        .body.counts.n_jobs,
    ).toBe(10_000);
    // Every row the submission wrote carries the id of the transaction that wrote it (xmin): one id for the
    // 10,000 jobs, their 10,000 submissions, the groups with their closure and counters, and the key.
    const rows: { what: string; xmin: string; n: number }[] = await t.dataSource.query(
      `SELECT 'jobs' AS what, xmin::text, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY xmin
       UNION ALL
       SELECT 'job_submissions', xmin::text, count(*)::int FROM job_submissions WHERE run_id = $1 GROUP BY xmin
       UNION ALL
       SELECT 'job_groups', xmin::text, count(*)::int FROM job_groups WHERE run_id = $1 GROUP BY xmin
       UNION ALL
       SELECT 'job_group_self_and_ancestors', xmin::text, count(*)::int
         FROM job_group_self_and_ancestors WHERE run_id = $1 GROUP BY xmin
       UNION ALL
       SELECT 'job_group_counters', xmin::text, count(*)::int FROM job_group_counters WHERE run_id = $1 GROUP BY xmin
       UNION ALL
       SELECT 'idempotency_keys', xmin::text, count(*)::int
         FROM idempotency_keys WHERE resource_kind = 'run' AND resource_id = $1::text GROUP BY xmin`,
      [res.body.id],
    );
    const xmin = rows[0].xmin;
    expect(rows.map((r) => ({ what: r.what, n: r.n, xmin: r.xmin }))).toEqual(
      [
        ['jobs', 10_000],
        ['job_submissions', 10_000],
        ['job_groups', 2],
        ['job_group_self_and_ancestors', 3],
        ['job_group_counters', 2 * COUNTER_TOKENS],
        ['idempotency_keys', 1],
      ].map(([what, n]) => ({ what, n, xmin })),
    );
    // The run row itself is written in a savepoint of that transaction (a run-name collision retries without
    // aborting the rest), so its xmin is a subtransaction's: the next test shows it goes with the rest.
  });

  it('a 10,000-job submission failing after its last write leaves nothing: run, groups, jobs rolled back', async () => {
    const before = await rowCounts(t);
    const original = JobGroupsService.prototype.countNewJobs;
    const crash = jest.spyOn(JobGroupsService.prototype, 'countNewJobs').mockImplementationOnce(async function (
      this: JobGroupsService,
      ...args
    ) {
      await original.apply(this, args);
      throw new Error('crash after the last write of the submission');
    });
    try {
      const res = await t.http
        .post(`/api/v1/projects/${project}/runs`)
        .set(owner.auth)
        .send({
          run_name: uniqueName('never'),
          job_groups: [{ ref: 'g' }],
          jobs: [
            { spec: jobSpec(), replicas: 5000 },
            { spec: jobSpec(), group_ref: 'g', replicas: 5000 },
          ],
        });
      expect(res.status).toBe(500);
      expect(crash).toHaveBeenCalledTimes(1);
    } finally {
      crash.mockRestore();
    }
    expect(await rowCounts(t)).toEqual(before);
  });
});
