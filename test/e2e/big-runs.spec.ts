import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeGroupChain, makeProject, makeRun } from '../support/factories';
import { measure, rowsVisited } from '../support/sql-counting';

/*
 * Issue #19, big runs: a read of a run costs what it returns, not what the run holds. Each route is measured on a
 * run of 4,000 jobs and on its twin of 40 (same depth-5 chain of groups, the same requests scaled down, the deepest
 * group's jobs added last, so they come after every other job in job order): the same statements, and the same rows
 * of jobs and job_submissions visited (EXPLAIN ANALYZE of the very statements each request sent), pages asking for
 * no more than the twin's groups hold. And new jobs and
 * submissions get time-ordered ids (appended to their indexes, not scattered over them).
 */

const PER_GROUP = { big: 1000, small: 10 };
/** Rows a twin may visit beyond the other (counters, cancellations: a few rows that do not follow job counts). */
const SLACK = 5;

interface Twin {
  project: string;
  runId: string;
  /** The chain below the root, depth 1 first. */
  chain: number[];
}

describe('big runs: reads cost what they return', () => {
  let t: TestApp;
  let owner: TestUser;
  const twins = {} as Record<'big' | 'small', Twin>;

  beforeAll(async () => {
    // Its own database: the jobs it leaves waiting on parents would stop schema.spec's roll-back of the migrations
    // (a migration's down() restores a status CHECK without `pending`).
    t = await createTestApp({}, { ownDatabase: 'bigruns' });
    owner = await t.user();
    for (const size of ['big', 'small'] as const) {
      const project = (await makeProject(t, owner)).name;
      const n = PER_GROUP[size];
      const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: n }] });
      const chain = await makeGroupChain(t, owner, project, run.id, 5);
      // Jobs at depth 1, 3 and 5, the deepest last.
      for (const g of [chain[0], chain[2], chain[4]])
        await t.http
          .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${g}/jobs`)
          .set(owner.auth)
          .send({ jobs: Array.from({ length: n }, (_, i) => ({ name: `j${i}`, spec: jobSpec() })) })
          .expect(201);
      twins[size] = { project, runId: run.id, chain };
    }
    await t.dataSource.query('ANALYZE jobs, job_submissions, job_groups, job_group_counters');
  });
  afterAll(() => t.close());

  const routes: [string, (r: Twin) => string][] = [
    ['group view, deepest group', (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/job-groups/${r.chain[4]}`],
    ['group view, root', (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/job-groups/0`],
    ['run view, 20 jobs', (r) => `/api/v1/projects/${r.project}/runs/${r.runId}?jobs_limit=20`],
    ['run cost', (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/cost`],
    ['runs list page, 20 jobs a run', (r) => `/api/v1/projects/${r.project}/runs?jobs_limit=20`],
    [
      "the deepest group's jobs page",
      (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/job-groups/${r.chain[4]}/jobs?limit=5`,
    ],
    [
      "a subtree's jobs page",
      (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/job-groups/${r.chain[1]}/jobs?recursive=true&limit=5`,
    ],
    ['children page of the root', (r) => `/api/v1/projects/${r.project}/runs/${r.runId}/job-groups/0/job-groups`],
    ["the run's events page", (r) => `/api/v1/projects/${r.project}/events?run_id=${r.runId}`],
  ];

  it.each(routes)('%s: the same statements and rows at 4,000 jobs as at 40', async (_, path) => {
    const cost = async (r: Twin) => {
      const m = await measure(t, () => t.http.get(path(r)).set(owner.auth).expect(200));
      const jobs = await rowsVisited(t.dataSource, m, 'jobs');
      const submissions = await rowsVisited(t.dataSource, m, 'job_submissions');
      // As a sorted list: reads running side by side on two connections interleave their statements.
      return { statements: [...m.sql].sort(), rows: jobs.visited + submissions.visited };
    };
    // Once each first: a connection opened on the way (its session settings) is not the route's cost.
    for (const r of [twins.big, twins.small]) await t.http.get(path(r)).set(owner.auth).expect(200);
    const big = await cost(twins.big);
    const small = await cost(twins.small);
    expect(big.statements).toEqual(small.statements);
    expect(big.rows).toBeLessThanOrEqual(small.rows + SLACK);
  });

  it('jobs waiting on parents below a cancellation are counted from the counters, not read', async () => {
    // Per size: p in the root, its children in group a (cancelled), one always_run child in group b (not).
    const made: Record<'big' | 'small', { project: string; runId: string }> = {} as never;
    for (const [size, children] of [
      ['big', 2000],
      ['small', 20],
    ] as const) {
      const project = (await makeProject(t, owner)).name;
      const run = await makeRun(t, owner, project, {
        job_groups: [{ ref: 'a' }, { ref: 'b' }],
        jobs: [
          { name: 'p', ref: 'p', spec: jobSpec() },
          { name: 'c', group_ref: 'a', depends_on: ['p'], replicas: children, spec: jobSpec() },
          { name: 'keep', group_ref: 'b', depends_on: ['p'], always_run: true, spec: jobSpec() },
        ],
      });
      await t.http.post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/1/cancel`).set(owner.auth).expect(200);
      made[size] = { project, runId: run.id };
    }
    await t.dataSource.query('ANALYZE jobs, job_submissions');
    const read = async (r: { project: string; runId: string }, path: string) => {
      const url = `/api/v1/projects/${r.project}/runs/${r.runId}${path}`;
      await t.http.get(url).set(owner.auth).expect(200);
      let body: Record<string, unknown> = {};
      const m = await measure(t, async () => (body = (await t.http.get(url).set(owner.auth).expect(200)).body));
      return { body, rows: (await rowsVisited(t.dataSource, m, 'job_submissions')).visited, statements: m.client };
    };
    for (const path of ['/job-groups/1', '/job-groups/0', '?jobs_limit=0']) {
      const big = await read(made.big, path);
      const small = await read(made.small, path);
      expect(big.statements).toBe(small.statements);
      expect(big.rows).toBeLessThanOrEqual(small.rows + SLACK);
    }
    // Shown as the cancellation made them: a's children cancelled, b's always_run one still waiting.
    expect(((await read(made.big, '/job-groups/1')).body.counts as { n_pending: number }).n_pending).toBe(0);
    expect(((await read(made.big, '/job-groups/0')).body.counts as { n_pending: number }).n_pending).toBe(1);
    expect((await read(made.big, '?jobs_limit=0')).body.job_counts).toEqual({
      pending: 1,
      submitted: 1,
      terminated: 2000,
    });
  });

  it('new jobs and submissions get time-ordered ids: in job order, version 7', async () => {
    const { runId, chain } = twins.big;
    const rows: { job: string; submission: string }[] = await t.dataSource.query(
      `SELECT j.id AS job, j.latest_submission_id AS submission FROM jobs j
        WHERE j.run_id = $1 AND j.job_group_id = $2 ORDER BY j.job_num, j.replica_num`,
      [runId, chain[4]],
    );
    expect(rows).toHaveLength(PER_GROUP.big);
    for (const ids of [rows.map((r) => r.job), rows.map((r) => r.submission)]) {
      expect(ids.every((id) => id[14] === '7')).toBe(true);
      expect([...ids].sort()).toEqual(ids);
    }
  });
});
