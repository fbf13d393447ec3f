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
    t = await createTestApp();
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
      return { statements: m.client, rows: jobs.visited + submissions.visited };
    };
    // Once each first: a connection opened on the way (its session settings) is not the route's cost.
    for (const r of [twins.big, twins.small]) await t.http.get(path(r)).set(owner.auth).expect(200);
    const big = await cost(twins.big);
    const small = await cost(twins.small);
    expect(big.statements).toBe(small.statements);
    expect(big.rows).toBeLessThanOrEqual(small.rows + SLACK);
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
