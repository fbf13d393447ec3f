import { DataSource, EntityManager } from 'typeorm';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { jobSpec, makeProject, makeRun, RunBody, setMembers } from '../support/factories';
import { FETCH_PARTS } from '../../src/modules/jobs/latest-submissions.repository';
import { required } from '../../src/common/required';

/*
 * The runs list: GET /api/v1/runs and GET /api/v1/projects/{project}/runs.
 *
 * Submission histories are written straight into job_submissions (the worker lifecycle that would make retries
 * does not exist yet), and the job rows' denormalised facts are pointed at the newest row written, because the
 * list trusts those facts.
 */

// ---------------------------------------------------------------------------------------------------------------
// Response shapes

interface SubmissionView {
  id: string;
  submission_num: number;
  status: string;
  termination_reason: string | null;
  exit_status: number | null;
  submitted_at: string;
  started_at: string | null;
  finished_at: string | null;
  provisioning_data: Record<string, unknown> | null;
  runtime_data: Record<string, unknown> | null;
  cost_usd: number;
}

interface JobView {
  id: string;
  job_num: number;
  replica_num: number;
  job_name: string;
  job_group_id: number;
  status: string;
  termination_reason: string | null;
  cancelled_job_group_id: number | null;
  submission_count: number;
  folded_submissions: Record<string, number>;
  latest_job_submission: SubmissionView | null;
  job_submissions: SubmissionView[];
}

interface RunView {
  id: string;
  run_name: string;
  project: string;
  user: string;
  status: string;
  status_message: string | null;
  termination_reason: string | null;
  submitted_at: string;
  finished_at: string | null;
  jobs: JobView[];
}

interface Page {
  items: RunView[];
  next_cursor: string | null;
}

type Query = Record<string, string | number | boolean>;

// ---------------------------------------------------------------------------------------------------------------
// Helpers: submission histories written in SQL

/** Base time of the submissions the helpers write: submission n is submitted at BASE + n seconds. */
const SUBMISSIONS_BASE = Date.parse('2025-06-01T00:00:00.000Z');
const submittedAtOf = (num: number) => new Date(SUBMISSIONS_BASE + num * 1000).toISOString();
const finishedAtOf = (num: number) => new Date(SUBMISSIONS_BASE + num * 1000 + 500).toISOString();

type SubmissionInput = number | { num: number; status?: string; reason?: string | null };

interface WrittenSubmission {
  id: string;
  num: number;
  status: string;
  reason: string | null;
}

/**
 * Gives job `jobId` exactly the submissions `subs` (its previous history is dropped), e.g. [0, 1, 2, 5, 6, 9].
 * Defaults: older submissions `failed`/`failed_to_start_due_to_no_capacity`, the newest `running` with no reason.
 * The job's facts (latest id/num, submission_count = newest num + 1, status, termination_reason) follow the newest.
 * Returns the written rows, ascending.
 */
async function giveHistory(t: TestApp, jobId: string, subs: SubmissionInput[]): Promise<WrittenSubmission[]> {
  const specs = subs.map((s) => (typeof s === 'number' ? { num: s } : s)).sort((a, b) => a.num - b.num);
  if (specs.length === 0) throw new Error('a job keeps at least one submission');
  const maxNum = specs[specs.length - 1].num;
  const rows = specs.map((s) => ({
    num: s.num,
    status: s.status ?? (s.num === maxNum ? 'running' : 'failed'),
    reason: s.reason !== undefined ? s.reason : s.num === maxNum ? null : 'failed_to_start_due_to_no_capacity',
  }));
  return t.dataSource.transaction(async (m) => {
    await m.query('DELETE FROM job_submissions WHERE job_id = $1', [jobId]);
    const inserted: { id: string; submission_num: number }[] = await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                    priority, cpu, memory_mib, gpu, submitted_at, finished_at, provisioning_data,
                                    runtime_data)
       SELECT gen_random_uuid(), j.id, j.run_id, j.job_group_id, v.num, v.status, v.reason, 0,
              (j.spec->'resources'->>'cpu')::numeric, (j.spec->'resources'->>'memory_mib')::int,
              coalesce((j.spec->'resources'->>'gpu')::int, 0),
              $2::timestamptz + v.num * interval '1 second',
              CASE WHEN v.status IN ('done', 'failed', 'terminated', 'aborted')
                THEN $2::timestamptz + v.num * interval '1 second' + interval '500 milliseconds' END,
              jsonb_build_object('attempt', v.num), jsonb_build_object('job', j.id::text, 'num', v.num)
         FROM jobs j, unnest($3::int[], $4::text[], $5::text[]) AS v(num, status, reason)
        WHERE j.id = $1
       RETURNING id, submission_num`,
      [
        jobId,
        new Date(SUBMISSIONS_BASE).toISOString(),
        rows.map((r) => r.num),
        rows.map((r) => r.status),
        rows.map((r) => r.reason),
      ],
    );
    if (inserted.length !== rows.length) throw new Error(`job ${jobId} not found`);
    await pointFactsAtNewest(m, [jobId]);
    const idOf = new Map(inserted.map((r) => [r.submission_num, r.id]));
    return rows.map((r) => ({ ...r, id: required(idOf.get(r.num), `submission ${r.num}`) }));
  });
}

/** Sets each job's denormalised facts from its newest existing submission. */
async function pointFactsAtNewest(m: EntityManager, jobIds: string[]): Promise<void> {
  await m.query(
    `UPDATE jobs j
        SET latest_submission_id = s.id, latest_submission_num = s.submission_num,
            submission_count = s.submission_num + 1,
            status = s.status, termination_reason = s.termination_reason
       FROM (SELECT DISTINCT ON (job_id) job_id, id, submission_num, status, termination_reason
               FROM job_submissions WHERE job_id = ANY($1::uuid[]) ORDER BY job_id, submission_num DESC) s
      WHERE j.id = s.job_id`,
    [jobIds],
  );
}

/** The numbers seriesHistory writes: 0, then 1..to except those with n % mod = rem. */
function seriesNums(to: number, gap?: { mod: number; rem: number }): number[] {
  const out = [0];
  for (let n = 1; n <= to; n++) if (!gap || n % gap.mod !== gap.rem) out.push(n);
  return out;
}

/**
 * Deep histories in one statement (generate_series) for many jobs: keeps submission 0 (made `failed`), adds
 * 1..to except n % mod = rem; the newest (`to`, which must be kept) is `running`.
 */
async function seriesHistory(
  t: TestApp,
  jobIds: string[],
  to: number,
  gap?: { mod: number; rem: number },
): Promise<void> {
  if (gap && to % gap.mod === gap.rem) throw new Error('the newest submission must exist');
  await t.dataSource.transaction(async (m) => {
    await m.query(
      `UPDATE job_submissions SET status = 'failed', termination_reason = 'interrupted_by_no_capacity'
         WHERE job_id = ANY($1::uuid[]) AND submission_num = 0`,
      [jobIds],
    );
    await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                    priority, cpu, memory_mib, gpu, submitted_at, finished_at, provisioning_data,
                                    runtime_data)
       SELECT gen_random_uuid(), j.id, j.run_id, j.job_group_id, g,
              CASE WHEN g = $2 THEN 'running' ELSE 'failed' END,
              CASE WHEN g = $2 THEN NULL ELSE 'interrupted_by_no_capacity' END,
              0, 1, 1024, 0,
              $5::timestamptz + g * interval '1 second',
              CASE WHEN g = $2 THEN NULL
                   ELSE $5::timestamptz + g * interval '1 second' + interval '500 milliseconds' END,
              jsonb_build_object('attempt', g), jsonb_build_object('job', j.id::text, 'num', g)
         FROM jobs j CROSS JOIN generate_series(1, $2::int) AS g
        WHERE j.id = ANY($1::uuid[]) AND ($3::int IS NULL OR g % $3::int <> $4::int)`,
      [jobIds, to, gap?.mod ?? null, gap?.rem ?? 0, new Date(SUBMISSIONS_BASE).toISOString()],
    );
    await pointFactsAtNewest(m, jobIds);
  });
}

/** Ground truth straight from the table: the newest `n` submissions of a job, ascending. */
async function newestInDb(t: TestApp, jobId: string, n: number): Promise<{ id: string; num: number }[]> {
  const rows: { id: string; submission_num: number }[] = await t.dataSource.query(
    `SELECT id, submission_num FROM (SELECT id, submission_num FROM job_submissions WHERE job_id = $1
                                     ORDER BY submission_num DESC LIMIT $2) x ORDER BY submission_num`,
    [jobId, n],
  );
  return rows.map((r) => ({ id: r.id, num: r.submission_num }));
}

/** What the API must show for a submission the helpers wrote. */
function expectedSubmission(jobId: string, s: WrittenSubmission): Omit<SubmissionView, 'cost_usd'> {
  const finished = ['done', 'failed', 'terminated', 'aborted'].includes(s.status);
  return {
    id: s.id,
    submission_num: s.num,
    status: s.status,
    termination_reason: s.reason,
    exit_status: null,
    submitted_at: submittedAtOf(s.num),
    started_at: null,
    finished_at: finished ? finishedAtOf(s.num) : null,
    provisioning_data: { attempt: s.num },
    runtime_data: { job: jobId, num: s.num },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers: runs and HTTP

async function setSubmittedAt(t: TestApp, times: [runId: string, iso: string][]): Promise<void> {
  await t.dataSource.query(
    `UPDATE runs r SET submitted_at = v.at FROM unnest($1::uuid[], $2::timestamptz[]) AS v(id, at) WHERE r.id = v.id`,
    [times.map(([id]) => id), times.map(([, at]) => at)],
  );
}

async function setRunStatus(
  t: TestApp,
  runId: string,
  status: string,
  statusMessage: string | null = null,
  reason: string | null = null,
): Promise<void> {
  await t.dataSource.query(
    `UPDATE runs SET status = $2::varchar, status_message = $3, termination_reason = $4,
            finished_at = CASE WHEN $2::varchar IN ('done', 'failed', 'terminated') THEN now() END
      WHERE id = $1`,
    [runId, status, statusMessage, reason],
  );
}

/** (submitted_at, id) of runs as stored, for computing the expected order independently of the endpoint. */
async function keysOf(t: TestApp, runIds: string[]): Promise<{ id: string; at: string }[]> {
  const rows: { id: string; submitted_at: Date }[] = await t.dataSource.query(
    `SELECT id, submitted_at FROM runs WHERE id = ANY($1::uuid[])`,
    [runIds],
  );
  return rows.map((r) => ({ id: r.id, at: r.submitted_at.toISOString() }));
}

/** Newest first by submitted_at, then id (uuids order like their lowercase hex text in PostgreSQL). */
function sortKeys(keys: { id: string; at: string }[], ascending: boolean): string[] {
  const sorted = [...keys].sort((a, b) => {
    const byTime = Date.parse(a.at) - Date.parse(b.at);
    if (byTime !== 0) return byTime;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return (ascending ? sorted : sorted.reverse()).map((k) => k.id);
}

async function list(t: TestApp, user: TestUser, url: string, query: Query = {}): Promise<Page> {
  const res = await t.http.get(url).set(user.auth).query(query);
  if (res.status !== 200)
    throw new Error(`GET ${url} ${JSON.stringify(query)}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Page;
}

/** Walks every page; `between(i)` runs after page i whenever there is a next page. */
async function walk(
  t: TestApp,
  user: TestUser,
  url: string,
  query: Query,
  between?: (pageIndex: number, page: Page) => Promise<void>,
): Promise<{ ids: string[]; sizes: number[]; pages: Page[] }> {
  const ids: string[] = [];
  const sizes: number[] = [];
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 2000; i++) {
    const page = await list(t, user, url, cursor ? { ...query, cursor } : query);
    pages.push(page);
    ids.push(...page.items.map((r) => r.id));
    sizes.push(page.items.length);
    if (page.next_cursor === null) return { ids, sizes, pages };
    expect(typeof page.next_cursor).toBe('string');
    cursor = page.next_cursor;
    if (between) await between(i, page);
  }
  throw new Error('the walk never ended');
}

const projectRuns = (project: string) => `/api/v1/projects/${project}/runs`;
const ALL_RUNS = '/api/v1/runs';
const nums = (j: JobView) => j.job_submissions.map((s) => s.submission_num);

async function makeRuns(t: TestApp, user: TestUser, project: string, n: number, body: RunBody = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await makeRun(t, user, project, body)).id);
  return ids;
}

async function stopRun(t: TestApp, user: TestUser, project: string, runId: string): Promise<void> {
  const res = await t.http
    .post(`${projectRuns(project)}/${runId}/stop`)
    .set(user.auth)
    .send({});
  if (res.status !== 200) throw new Error(`stop failed: ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body.status).toBe('terminated');
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers: counting SQL round trips

interface Measured {
  /** Statements sent by pg clients (everything, including transaction control). */
  client: number;
  /**
   * Statements through TypeORM's PostgresQueryRunner.query (query builders, repositories, manager/DataSource.query).
   */
  runner: number;
  /** Of those, the ones issued through DataSource.query / EntityManager.query. */
  viaDataSource: number;
  viaManager: number;
  /** Rows the database returned over all statements. */
  rows: number;
  sql: string[];
  /** The statements with their parameters, to EXPLAIN them afterwards. */
  statements: { sql: string; params: unknown[] }[];
}

type QueryFn = (this: unknown, ...args: unknown[]) => unknown;

async function measure(t: TestApp, fn: () => Promise<unknown>): Promise<Measured> {
  const pgClientProto = (t.dataSource.driver as unknown as { postgres: { Client: { prototype: { query: QueryFn } } } })
    .postgres.Client.prototype;
  const original = pgClientProto.query;
  const out: Measured = { client: 0, runner: 0, viaDataSource: 0, viaManager: 0, rows: 0, sql: [], statements: [] };
  const pending: Promise<unknown>[] = [];
  const clientSpy = jest.spyOn(pgClientProto, 'query').mockImplementation(function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string; values?: unknown[] } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '<query object>');
    const params = Array.isArray(args[1])
      ? (args[1] as unknown[])
      : typeof first === 'object' && Array.isArray(first.values)
        ? first.values
        : [];
    out.sql.push(text);
    out.statements.push({ sql: text, params });
    const result = original.apply(this, args);
    if (
      result &&
      typeof (result as { on?: unknown }).on === 'function' &&
      typeof (result as Promise<unknown>).then !== 'function'
    ) {
      // A submitted Query whose rows are streamed (forEachRow): count them as they go by.
      const streamed = result as { on: (event: string, fn: (...a: unknown[]) => void) => void };
      pending.push(
        new Promise<void>((resolve) => {
          streamed.on('row', () => void out.rows++);
          streamed.on('end', () => resolve());
          streamed.on('error', () => resolve());
        }),
      );
    } else if (result && typeof (result as Promise<unknown>).then === 'function') {
      pending.push(
        (result as Promise<{ rows?: unknown[] } | undefined>).then(
          (r) => {
            out.rows += Array.isArray(r?.rows) ? r.rows.length : 0;
          },
          () => undefined,
        ),
      );
    }
    return result;
  });
  const runnerSpy = jest.spyOn(PostgresQueryRunner.prototype, 'query');
  const dataSourceSpy = jest.spyOn(DataSource.prototype, 'query');
  const managerSpy = jest.spyOn(EntityManager.prototype, 'query');
  try {
    await fn();
    await Promise.all(pending);
    out.client = clientSpy.mock.calls.length;
    out.runner = runnerSpy.mock.calls.length;
    out.viaDataSource = dataSourceSpy.mock.calls.length;
    out.viaManager = managerSpy.mock.calls.length;
  } finally {
    clientSpy.mockRestore();
    runnerSpy.mockRestore();
    dataSourceSpy.mockRestore();
    managerSpy.mockRestore();
  }
  return out;
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/**
 * Rows of job_submissions the database actually visited (returned by scans plus those scanned and thrown away by
 * filters) over every statement of a measured request, from EXPLAIN ANALYZE of the very statements it sent.
 */
async function submissionRowsVisited(t: TestApp, m: Measured): Promise<{ visited: number; statements: number }> {
  let visited = 0;
  let statements = 0;
  const walkPlan = (node: PlanNode) => {
    if (node['Relation Name'] === 'job_submissions') {
      const loops = node['Actual Loops'] ?? 1;
      visited +=
        ((node['Actual Rows'] ?? 0) +
          (node['Rows Removed by Filter'] ?? 0) +
          (node['Rows Removed by Index Recheck'] ?? 0)) *
        loops;
    }
    for (const child of node.Plans ?? []) walkPlan(child);
  };
  for (const st of m.statements) {
    if (!/job_submissions/i.test(st.sql)) continue;
    statements++;
    const [row] = await t.dataSource.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${st.sql}`, st.params);
    const plan = (typeof row['QUERY PLAN'] === 'string' ? JSON.parse(row['QUERY PLAN']) : row['QUERY PLAN']) as {
      Plan: PlanNode;
    }[];
    walkPlan(plan[0].Plan);
  }
  return { visited, statements };
}

// ---------------------------------------------------------------------------------------------------------------

describe('runs list: GET /api/v1/runs and GET /api/v1/projects/{project}/runs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('job_submissions_limit: the N newest existing submissions of every job', () => {
    let owner: TestUser;
    let project: string;
    let runId: string;
    let gappy: { jobId: string; written: WrittenSubmission[] };
    let untouchedJobId: string;
    let untouchedSubId: string;

    beforeAll(async () => {
      owner = await t.user();
      project = (await makeProject(t, owner)).name;
      const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }, { spec: jobSpec() }] });
      runId = run.id;
      untouchedJobId = run.jobs[1].id;
      untouchedSubId = required(run.jobs[1].latest_job_submission, 'the latest submission').id;
      gappy = {
        jobId: run.jobs[0].id,
        written: await giveHistory(t, run.jobs[0].id, [
          { num: 0, status: 'failed', reason: 'failed_to_start_due_to_no_capacity' },
          { num: 1, status: 'failed', reason: 'interrupted_by_no_capacity' },
          { num: 2, status: 'failed', reason: 'instance_unreachable' },
          { num: 5, status: 'failed', reason: 'container_exited_with_error' },
          { num: 6, status: 'failed', reason: 'executor_error' },
          { num: 9, status: 'running', reason: null },
        ]),
      };
    });

    const onlyRun = async (query: Query, url = projectRuns(project)): Promise<RunView> => {
      const page = await list(t, owner, url, query);
      expect(page.items.map((r) => r.id)).toEqual([runId]);
      expect(page.next_cursor).toBeNull();
      return page.items[0];
    };

    it.each<[number, number[]]>([
      [1, [9]],
      [2, [6, 9]],
      [3, [5, 6, 9]],
      [4, [2, 5, 6, 9]],
      [5, [1, 2, 5, 6, 9]],
      [6, [0, 1, 2, 5, 6, 9]],
      [7, [0, 1, 2, 5, 6, 9]],
      [10, [0, 1, 2, 5, 6, 9]],
      [100, [0, 1, 2, 5, 6, 9]],
    ])('N=%i on numbers 0,1,2,5,6,9 returns %j (counting rows, not numbers), ascending', async (n, expected) => {
      for (const url of [projectRuns(project), ALL_RUNS]) {
        const run = await onlyRun({ job_submissions_limit: n }, url);
        expect(run.jobs.map((j) => j.id)).toEqual([gappy.jobId, untouchedJobId]);
        const [job, untouched] = run.jobs;
        expect(nums(job)).toEqual(expected);
        const byNum = new Map(gappy.written.map((s) => [s.num, s]));
        expect(job.job_submissions.map((s) => ({ ...s, cost_usd: undefined }))).toEqual(
          expected.map((num) => ({
            ...expectedSubmission(gappy.jobId, required(byNum.get(num), `submission ${num}`)),
            cost_usd: undefined,
          })),
        );
        for (const s of job.job_submissions) expect(typeof s.cost_usd).toBe('number');
        // latest_job_submission is the newest submission, in full
        expect(job.latest_job_submission).toEqual(job.job_submissions[job.job_submissions.length - 1]);
        expect(job.latest_job_submission?.submission_num).toBe(9);
        expect(job).toMatchObject({
          job_num: 0,
          replica_num: 0,
          status: 'running',
          termination_reason: null,
          submission_count: 10,
          cancelled_job_group_id: null,
        });
        // the other job of the run is not disturbed by its neighbour's history
        expect(untouched.job_submissions.map((s) => [s.id, s.submission_num, s.status])).toEqual([
          [untouchedSubId, 0, 'submitted'],
        ]);
        expect(untouched.latest_job_submission?.id).toBe(untouchedSubId);
        expect(untouched).toMatchObject({ job_num: 1, status: 'submitted', submission_count: 1 });
      }
    });

    it('matches the table: the same ids as the newest N rows read straight from job_submissions', async () => {
      for (const n of [1, 3, 4, 6]) {
        const run = await onlyRun({ job_submissions_limit: n });
        expect(run.jobs[0].job_submissions.map((s) => ({ id: s.id, num: s.submission_num }))).toEqual(
          await newestInDb(t, gappy.jobId, n),
        );
      }
    });

    it('omitted job_submissions_limit means 10 (while GET of one run means all)', async () => {
      const run = await makeRun(t, owner, project);
      const jobId = run.jobs[0].id;
      const history = [0, 1, 2, 4, 5, 6, 8, 9, 11, 12, 13, 14, 17, 18, 19, 20]; // 16 submissions, gaps
      await giveHistory(t, jobId, history);
      try {
        const page = await list(t, owner, projectRuns(project), { limit: 1 });
        expect(page.items[0].id).toBe(run.id);
        const job = page.items[0].jobs[0];
        expect(nums(job)).toEqual(history.slice(-10));
        expect(nums(job)).toEqual([8, 9, 11, 12, 13, 14, 17, 18, 19, 20]);
        expect(job.latest_job_submission?.submission_num).toBe(20);
        expect(job.submission_count).toBe(21);
        const explicit = await list(t, owner, projectRuns(project), { limit: 1, job_submissions_limit: 10 });
        expect(explicit.items[0].jobs[0].job_submissions).toEqual(job.job_submissions);
        const one = await t.http
          .get(`${projectRuns(project)}/${run.id}`)
          .set(owner.auth)
          .expect(200);
        expect(nums(one.body.jobs[0])).toEqual(history);
      } finally {
        await stopRun(t, owner, project, run.id);
        await t.http
          .delete(`${projectRuns(project)}/${run.id}`)
          .set(owner.auth)
          .expect(204);
      }
    });

    it('N=0: every job with latest_job_submission but no job_submissions; the run still has its status', async () => {
      await setRunStatus(t, runId, 'running', 'retrying');
      try {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          const run = await onlyRun({ job_submissions_limit: 0 }, url);
          expect(run).toMatchObject({
            id: runId,
            status: 'running',
            status_message: 'retrying',
            termination_reason: null,
            project,
            user: owner.name,
          });
          expect(run.jobs.map((j) => j.id)).toEqual([gappy.jobId, untouchedJobId]);
          for (const j of run.jobs) expect(j.job_submissions).toEqual([]);
          const newest = gappy.written[gappy.written.length - 1];
          expect({ ...run.jobs[0].latest_job_submission, cost_usd: undefined }).toEqual({
            ...expectedSubmission(gappy.jobId, newest),
            cost_usd: undefined,
          });
          expect(run.jobs[0]).toMatchObject({ status: 'running', submission_count: 10 });
          expect(run.jobs[1].latest_job_submission).toMatchObject({
            id: untouchedSubId,
            submission_num: 0,
            status: 'submitted',
          });
          // the same latest_job_submission as with N=1
          const withOne = await onlyRun({ job_submissions_limit: 1 }, url);
          expect(run.jobs.map((j) => j.latest_job_submission)).toEqual(
            withOne.jobs.map((j) => j.latest_job_submission),
          );
        }
      } finally {
        await setRunStatus(t, runId, 'submitted');
      }
    });

    it('include_jobs=false returns runs with jobs: [] and their status; include_jobs=true is the default', async () => {
      await setRunStatus(t, runId, 'pending', 'retrying');
      try {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          for (const query of [
            { include_jobs: false },
            { include_jobs: 'false', job_submissions_limit: 5 },
          ] as Query[]) {
            const run = await onlyRun(query, url);
            expect(run).toMatchObject({
              id: runId,
              status: 'pending',
              status_message: 'retrying',
              termination_reason: null,
              project,
              user: owner.name,
              jobs: [],
            });
          }
          const explicit = await onlyRun({ include_jobs: true }, url);
          const implicit = await onlyRun({}, url);
          expect(explicit).toEqual(implicit);
          expect(nums(implicit.jobs[0])).toEqual([0, 1, 2, 5, 6, 9]);
        }
      } finally {
        await setRunStatus(t, runId, 'submitted');
      }
    });

    it('multi-replica runs: every (job_num, replica_num) gets its own newest N', async () => {
      const run = await makeRun(t, owner, project, {
        jobs: [
          { spec: jobSpec(), replicas: 2 },
          { spec: jobSpec(), replicas: 2 },
        ],
      });
      expect(run.jobs.map((j) => [j.job_num, j.replica_num])).toEqual([
        [0, 0],
        [0, 1],
        [1, 0],
        [1, 1],
      ]);
      const histories: Record<string, number[]> = {
        [run.jobs[0].id]: [0, 1, 2, 5, 6, 9],
        [run.jobs[1].id]: [0],
        [run.jobs[2].id]: [0, 1, 2, 3],
        [run.jobs[3].id]: [4, 7], // submission 0 gone: history may start above 0
      };
      const written = new Map<string, WrittenSubmission[]>();
      for (const [jobId, h] of Object.entries(histories))
        written.set(jobId, h.length === 1 && h[0] === 0 ? [] : await giveHistory(t, jobId, h));
      try {
        for (const n of [1, 2, 3, 4, 10]) {
          const page = await list(t, owner, projectRuns(project), { limit: 1, job_submissions_limit: n });
          const got = page.items[0];
          expect(got.id).toBe(run.id);
          expect(got.jobs.map((j) => [j.job_num, j.replica_num])).toEqual([
            [0, 0],
            [0, 1],
            [1, 0],
            [1, 1],
          ]);
          for (const j of got.jobs) {
            const h = histories[j.id];
            expect({ job: j.id, nums: nums(j) }).toEqual({ job: j.id, nums: h.slice(-n) });
            expect(j.latest_job_submission?.submission_num).toBe(h[h.length - 1]);
            expect(j.latest_job_submission).toEqual(j.job_submissions[j.job_submissions.length - 1]);
            expect(j.submission_count).toBe(h[h.length - 1] + 1);
            const own = required(written.get(j.id), `the history written for job ${j.id}`);
            if (own.length > 0) {
              const ownIds = new Set(own.map((s) => s.id));
              for (const s of j.job_submissions) expect(ownIds.has(s.id)).toBe(true);
              expect(j.job_submissions.map((s) => s.runtime_data)).toEqual(
                h.slice(-n).map((num) => ({ job: j.id, num })),
              );
            }
          }
        }
      } finally {
        await stopRun(t, owner, project, run.id);
        await t.http
          .delete(`${projectRuns(project)}/${run.id}`)
          .set(owner.auth)
          .expect(204);
      }
    });

    it('deep histories (300 and 250 submissions) return exactly the right newest rows', async () => {
      const run = await makeRun(t, owner, project, {
        jobs: [{ spec: jobSpec() }, { spec: jobSpec() }, { spec: jobSpec() }],
      });
      const [deep, contiguous] = run.jobs.map((j) => j.id); // the third job keeps one submission
      const gap = { mod: 3, rem: 1 };
      await seriesHistory(t, [deep], 449, gap);
      await seriesHistory(t, [contiguous], 249);
      const deepNums = seriesNums(449, gap);
      const contiguousNums = seriesNums(249);
      expect(deepNums).toHaveLength(300);
      const [{ n: stored }] = await t.dataSource.query(
        'SELECT count(*)::int AS n FROM job_submissions WHERE job_id = $1',
        [deep],
      );
      expect(stored).toBe(300);
      try {
        for (const n of [1, 2, 10, 37, 100, undefined]) {
          const query: Query = { limit: 1 };
          if (n !== undefined) query.job_submissions_limit = n;
          const got = (await list(t, owner, projectRuns(project), query)).items[0];
          expect(got.id).toBe(run.id);
          const expectedN = n ?? 10;
          const [d, c, s] = got.jobs;
          expect(nums(d)).toEqual(deepNums.slice(-expectedN));
          expect(nums(c)).toEqual(contiguousNums.slice(-expectedN));
          expect(nums(s)).toEqual([0]);
          expect(d.job_submissions.map((x) => ({ id: x.id, num: x.submission_num }))).toEqual(
            await newestInDb(t, deep, expectedN),
          );
          expect(c.job_submissions.map((x) => ({ id: x.id, num: x.submission_num }))).toEqual(
            await newestInDb(t, contiguous, expectedN),
          );
          expect(d).toMatchObject({
            status: 'running',
            submission_count: 450,
            latest_job_submission: { submission_num: 449, status: 'running' },
          });
          expect(c).toMatchObject({
            status: 'running',
            submission_count: 250,
            latest_job_submission: { submission_num: 249, status: 'running' },
          });
          for (const x of d.job_submissions.slice(0, -1))
            expect(x).toMatchObject({ status: 'failed', termination_reason: 'interrupted_by_no_capacity' });
          for (const x of d.job_submissions.filter((y) => y.submission_num > 0))
            expect(x.submitted_at).toBe(submittedAtOf(x.submission_num));
          expect(d.job_submissions[d.job_submissions.length - 1]).toMatchObject({
            status: 'running',
            termination_reason: null,
            runtime_data: { job: deep, num: 449 },
          });
        }
        const none = (await list(t, owner, projectRuns(project), { limit: 1, job_submissions_limit: 0 })).items[0];
        expect(none.jobs.map((j) => [j.job_submissions.length, j.latest_job_submission?.submission_num])).toEqual([
          [0, 449],
          [0, 249],
          [0, 0],
        ]);
      } finally {
        await stopRun(t, owner, project, run.id);
        await t.http
          .delete(`${projectRuns(project)}/${run.id}`)
          .set(owner.auth)
          .expect(204);
      }
    });
  });

  describe('keyset pagination', () => {
    let owner: TestUser;
    let project: string;
    let keys: { id: string; at: string }[];

    // 9 runs; ties of 3 and 2 runs on the same millisecond, and two runs 1 ms apart.
    const TIMES = [
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.001Z',
      '2021-03-01T10:00:05.500Z',
      '2021-03-01T10:00:05.500Z',
      '2021-03-02T00:00:00.000Z',
      '2021-03-02T00:00:00.999Z',
      '2021-03-02T00:00:00.999Z',
    ];

    beforeAll(async () => {
      owner = await t.user();
      project = (await makeProject(t, owner)).name;
      const ids = await makeRuns(t, owner, project, TIMES.length);
      // assign times in a shuffled order so creation order does not line up with list order
      const order = [4, 0, 8, 2, 6, 1, 7, 3, 5];
      await setSubmittedAt(
        t,
        ids.map((id, i) => [id, TIMES[order[i]]]),
      );
      keys = await keysOf(t, ids);
    });

    it('stores the times exactly (millisecond precision) and has real ties', async () => {
      expect(keys.map((k) => k.at).sort()).toEqual([...TIMES].sort());
      expect(new Set(keys.map((k) => k.at)).size).toBe(5);
    });

    it('defaults to newest first by submitted_at then id; ascending=true is the exact reverse', async () => {
      const desc = await list(t, owner, projectRuns(project), { include_jobs: false });
      expect(desc.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
      expect(desc.items.map((r) => r.submitted_at)).toEqual([...TIMES].sort().reverse());
      expect(desc.next_cursor).toBeNull();
      const explicitDesc = await list(t, owner, projectRuns(project), { include_jobs: false, ascending: false });
      expect(explicitDesc.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
      const asc = await list(t, owner, projectRuns(project), { include_jobs: false, ascending: true });
      expect(asc.items.map((r) => r.id)).toEqual(sortKeys(keys, true));
      expect(asc.items.map((r) => r.id)).toEqual([...desc.items.map((r) => r.id)].reverse());
      // the same order through GET /runs (the owner sees only this project)
      const global = await list(t, owner, ALL_RUNS, { include_jobs: false });
      expect(global.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
    });

    it.each<[number, boolean]>([
      [1, false],
      [2, false],
      [3, false],
      [4, false],
      [1, true],
      [2, true],
      [3, true],
      [4, true],
    ])(
      'walks every page with limit=%i (ascending=%s): no skips, no repeats, ties split across pages',
      async (limit, ascending) => {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          const { ids, sizes, pages } = await walk(t, owner, url, { limit, ascending, include_jobs: false });
          expect(ids).toEqual(sortKeys(keys, ascending));
          const full = Math.floor(keys.length / limit);
          const rest = keys.length % limit;
          expect(sizes).toEqual([...Array(full).fill(limit), ...(rest ? [rest] : [])]);
          expect(pages[pages.length - 1].next_cursor).toBeNull();
        }
      },
    );

    it('limit equal to the number of runs gives one page and next_cursor null; limit=100 too', async () => {
      for (const limit of [9, 100]) {
        const page = await list(t, owner, projectRuns(project), { limit, include_jobs: false });
        expect(page.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
        expect(page.next_cursor).toBeNull();
      }
      const eight = await list(t, owner, projectRuns(project), { limit: 8, include_jobs: false });
      expect(eight.items).toHaveLength(8);
      expect(eight.next_cursor).not.toBeNull();
      const last = await list(t, owner, projectRuns(project), {
        limit: 8,
        include_jobs: false,
        cursor: required(eight.next_cursor, 'next_cursor'),
      });
      expect(last.items.map((r) => r.id)).toEqual([sortKeys(keys, false)[8]]);
      expect(last.next_cursor).toBeNull();
    });

    it('a cursor is stateless: the same cursor gives the same page again', async () => {
      const first = await list(t, owner, projectRuns(project), { limit: 2, include_jobs: false });
      const a = await list(t, owner, projectRuns(project), {
        limit: 2,
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      const b = await list(t, owner, projectRuns(project), {
        limit: 2,
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      expect(b).toEqual(a);
      expect(a.items.map((r) => r.id)).toEqual(sortKeys(keys, false).slice(2, 4));
    });

    it('runs inserted between page fetches: no skip or repeat (descending: unseen; ascending: appended)', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const existing = await makeRuns(t, user, p, 7);
      await setSubmittedAt(t, [
        [existing[0], '2022-01-01T00:00:00.000Z'],
        [existing[1], '2022-01-01T00:00:00.000Z'],
        [existing[2], '2022-01-01T00:00:00.000Z'],
        [existing[3], '2022-01-02T00:00:00.000Z'],
        [existing[4], '2022-01-02T00:00:00.000Z'],
        [existing[5], '2022-01-03T00:00:00.000Z'],
        [existing[6], '2022-01-04T00:00:00.000Z'],
      ]);
      const existingKeys = await keysOf(t, existing);

      const insertedDuringDesc: string[] = [];
      const desc = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false }, async () => {
        insertedDuringDesc.push((await makeRun(t, user, p)).id);
        insertedDuringDesc.push((await makeRun(t, user, p)).id);
      });
      expect(insertedDuringDesc).toHaveLength(6); // 4 pages, 3 gaps between them
      expect(desc.ids).toEqual(sortKeys(existingKeys, false));

      const insertedDuringAsc: string[] = [];
      const asc = await walk(t, user, projectRuns(p), { limit: 2, ascending: true, include_jobs: false }, async () => {
        insertedDuringAsc.push((await makeRun(t, user, p)).id);
      });
      expect(insertedDuringAsc.length).toBeGreaterThan(0);
      const newKeys = await keysOf(t, [...insertedDuringDesc, ...insertedDuringAsc]);
      // every new run is newer than every existing one, so ascending it comes after them, each exactly once
      expect(asc.ids).toEqual([...sortKeys(existingKeys, true), ...sortKeys(newKeys, true)]);
      expect(new Set(asc.ids).size).toBe(asc.ids.length);

      // and a fresh walk afterwards sees everything once, newest first
      const after = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false });
      expect(after.ids).toEqual(sortKeys([...existingKeys, ...newKeys], false));
    });

    it('runs inserted concurrently with page fetches never cause skips or repeats of the existing runs', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const existing = await makeRuns(t, user, p, 8);
      await setSubmittedAt(
        t,
        existing.map((id, i) => [id, `2022-02-0${1 + Math.floor(i / 3)}T00:00:00.000Z`]),
      );
      const existingKeys = await keysOf(t, existing);
      const existingSet = new Set(existing);
      for (const ascending of [false, true]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        for (let i = 0; i < 100; i++) {
          const query: Query = { limit: 2, ascending, include_jobs: false };
          if (cursor) query.cursor = cursor;
          const [page] = await Promise.all([
            list(t, user, projectRuns(p), query),
            makeRun(t, user, p),
            makeRun(t, user, p),
          ]);
          seen.push(...page.items.map((r) => r.id));
          if (page.next_cursor === null) break;
          cursor = page.next_cursor;
          if (ascending && seen.filter((id) => !existingSet.has(id)).length > 6) break; // the tail keeps growing
        }
        expect(new Set(seen).size).toBe(seen.length);
        expect(seen.filter((id) => existingSet.has(id))).toEqual(sortKeys(existingKeys, ascending));
      }
    });

    it('a soft-deleted run, even the one a cursor points at, is skipped without disturbing the walk', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const ids = await makeRuns(t, user, p, 7);
      await setSubmittedAt(
        t,
        ids.map((id, i) => [id, `2022-03-01T00:00:0${Math.floor(i / 2)}.000Z`]),
      );
      const ordered = sortKeys(await keysOf(t, ids), false);
      const deleted: string[] = [];
      const { ids: seen } = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false }, async (i, page) => {
        if (i !== 0) return;
        // delete the run the cursor was made from and the first run of the next page
        const cursorRun = page.items[1].id;
        const nextFirst = ordered[2];
        for (const id of [cursorRun, nextFirst]) {
          await stopRun(t, user, p, id);
          await t.http
            .delete(`${projectRuns(p)}/${id}`)
            .set(user.auth)
            .expect(204);
          deleted.push(id);
        }
      });
      expect(deleted).toEqual([ordered[1], ordered[2]]);
      expect(seen).toEqual([ordered[0], ordered[1], ...ordered.slice(3)]);
    });

    it('default limit is 20', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const ids = await makeRuns(t, user, p, 21);
      const order = sortKeys(await keysOf(t, ids), false);
      const first = await list(t, user, projectRuns(p), { include_jobs: false });
      expect(first.items.map((r) => r.id)).toEqual(order.slice(0, 20));
      expect(first.next_cursor).not.toBeNull();
      const second = await list(t, user, projectRuns(p), {
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      expect(second.items.map((r) => r.id)).toEqual(order.slice(20));
      expect(second.next_cursor).toBeNull();
    });
  });

  describe('filters', () => {
    let owner: TestUser;
    let member: TestUser;
    let project: string;
    const r: Record<string, string> = {};
    let allDesc: string[];

    beforeAll(async () => {
      owner = await t.user();
      member = await t.user();
      project = (await makeProject(t, owner)).name;
      await setMembers(t, owner, project, [
        { user: owner.name, role: 'admin' },
        { user: member.name, role: 'user' },
      ]);
      r.submitted = (await makeRun(t, owner, project)).id;
      r.stopped = (await makeRun(t, owner, project)).id;
      await stopRun(t, owner, project, r.stopped);
      r.done = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.done, 'done', null, 'all_jobs_done');
      r.failed = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.failed, 'failed', null, 'job_failed');
      r.running = (await makeRun(t, owner, project)).id;
      await setRunStatus(t, r.running, 'running', 'retrying');
      r.pending = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.pending, 'pending', 'retrying');
      r.terminating = (await makeRun(t, owner, project)).id;
      await setRunStatus(t, r.terminating, 'terminating', 'stopping', 'stopped_by_user');
      allDesc = sortKeys(await keysOf(t, Object.values(r)), false);
    });

    const only = (...names: string[]) => allDesc.filter((id) => names.some((n) => r[n] === id));
    const ids = async (query: Query, url = projectRuns(project), user = owner) => {
      const page = await list(t, user, url, { limit: 100, include_jobs: false, ...query });
      expect(page.next_cursor).toBeNull();
      return page.items.map((x) => x.id);
    };

    it('no filter lists all seven runs with their stored status', async () => {
      const page = await list(t, owner, projectRuns(project), { include_jobs: false });
      expect(page.items.map((x) => x.id)).toEqual(allDesc);
      const statusOf = new Map(
        page.items.map((x) => [x.id, [x.status, x.status_message, x.termination_reason, x.user]]),
      );
      expect(statusOf.get(r.submitted)).toEqual(['submitted', null, null, owner.name]);
      expect(statusOf.get(r.stopped)).toEqual(['terminated', null, 'stopped_by_user', owner.name]);
      expect(statusOf.get(r.done)).toEqual(['done', null, 'all_jobs_done', member.name]);
      expect(statusOf.get(r.failed)).toEqual(['failed', null, 'job_failed', member.name]);
      expect(statusOf.get(r.running)).toEqual(['running', 'retrying', null, owner.name]);
      expect(statusOf.get(r.pending)).toEqual(['pending', 'retrying', null, member.name]);
      expect(statusOf.get(r.terminating)).toEqual(['terminating', 'stopping', 'stopped_by_user', owner.name]);
    });

    it.each<[string, string[]]>([
      ['terminated,done', ['stopped', 'done']],
      ['terminated, done', ['stopped', 'done']],
      ['done', ['done']],
      ['running', ['running']],
      ['pending,submitted', ['pending', 'submitted']],
      ['failed,terminating,pending', ['failed', 'terminating', 'pending']],
      ['provisioning', []],
      ['done,done', ['done']],
    ])('status=%s', async (status, expected) => {
      expect(await ids({ status })).toEqual(only(...expected));
      expect(await ids({ status }, ALL_RUNS)).toEqual(only(...expected));
    });

    it('an unknown status is 400 VALIDATION_FAILED naming status', async () => {
      for (const status of ['bogus', 'done,bogus', 'DONE', 'terminated;done']) {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          const res = await t.http.get(url).set(owner.auth).query({ status });
          expect({ status, code: res.status }).toEqual({ status, code: 400 });
          expect(res.body.code).toBe('VALIDATION_FAILED');
          expect(res.body.message).toMatch(/status/);
          expect(res.body.details.map((d: { field: string }) => d.field)).toContain('status');
        }
      }
    });

    it('only_active=true excludes finished runs (terminated, done, failed); only_active=false keeps them', async () => {
      expect(await ids({ only_active: true })).toEqual(only('submitted', 'running', 'pending', 'terminating'));
      expect(await ids({ only_active: true }, ALL_RUNS)).toEqual(
        only('submitted', 'running', 'pending', 'terminating'),
      );
      expect(await ids({ only_active: false })).toEqual(allDesc);
      expect(await ids({ only_active: true, status: 'done' })).toEqual([]);
      expect(await ids({ only_active: true, status: 'running,done,terminated' })).toEqual(only('running'));
    });

    it("user=<name> lists that user's runs only; an unknown user gives an empty list", async () => {
      expect(await ids({ user: member.name })).toEqual(only('done', 'failed', 'pending'));
      expect(await ids({ user: owner.name })).toEqual(only('submitted', 'stopped', 'running', 'terminating'));
      expect(await ids({ user: member.name }, ALL_RUNS, member)).toEqual(only('done', 'failed', 'pending'));
      expect(await ids({ user: member.name, status: 'done,submitted' })).toEqual(only('done'));
      expect(await ids({ user: owner.name, only_active: true })).toEqual(only('submitted', 'running', 'terminating'));
      const unknown = await list(t, owner, projectRuns(project), { user: uniqueName('nobody') });
      expect(unknown).toEqual({ items: [], next_cursor: null });
      const unknownAll = await list(t, owner, ALL_RUNS, { user: uniqueName('nobody') });
      expect(unknownAll).toEqual({ items: [], next_cursor: null });
      // a user who exists but has no runs here
      const stranger = await t.user();
      expect(await ids({ user: stranger.name })).toEqual([]);
    });

    it('filters paginate: walking status=terminated,done,failed with limit=1', async () => {
      const { ids: walked, sizes } = await walk(t, owner, projectRuns(project), {
        limit: 1,
        status: 'terminated,done,failed',
        include_jobs: false,
      });
      expect(walked).toEqual(only('stopped', 'done', 'failed'));
      expect(sizes).toEqual([1, 1, 1]);
      const asc = await walk(t, owner, projectRuns(project), {
        limit: 2,
        ascending: true,
        user: member.name,
        include_jobs: false,
      });
      expect(asc.ids).toEqual([...only('done', 'failed', 'pending')].reverse());
    });
  });

  describe('visibility', () => {
    let u1: TestUser;
    let u2: TestUser;
    let u3: TestUser;
    let p1: string;
    let p2: string;
    let p3: string;
    let runs1: string[];
    let runs2: string[];
    let runs3: string[];

    beforeAll(async () => {
      u1 = await t.user();
      u2 = await t.user();
      u3 = await t.user();
      p1 = (await makeProject(t, u1)).name;
      p2 = (await makeProject(t, u2)).name;
      p3 = (await makeProject(t, u3)).name;
      await setMembers(t, u2, p2, [
        { user: u2.name, role: 'admin' },
        { user: u1.name, role: 'user' },
      ]);
      runs1 = await makeRuns(t, u1, p1, 2);
      runs2 = [...(await makeRuns(t, u2, p2, 2)), ...(await makeRuns(t, u1, p2, 1))];
      runs3 = await makeRuns(t, u3, p3, 3);
    });

    it('a normal user sees exactly the runs of the projects they are a member of', async () => {
      const all = await walk(t, u1, ALL_RUNS, { limit: 2, include_jobs: false });
      expect(all.ids).toEqual(sortKeys(await keysOf(t, [...runs1, ...runs2]), false));
      for (const id of runs3) expect(all.ids).not.toContain(id);
      const projects = new Set(all.pages.flatMap((p) => p.items.map((x) => x.project)));
      expect([...projects].sort()).toEqual([p1, p2].sort());

      const u3all = await list(t, u3, ALL_RUNS, { limit: 100 });
      expect(u3all.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs3), false));
      expect(u3all.items.every((x) => x.project === p3 && x.user === u3.name)).toBe(true);
      // filtering by another project's user shows nothing of theirs
      expect((await list(t, u1, ALL_RUNS, { user: u3.name })).items).toEqual([]);
    });

    it("another project's runs never appear, even with jobs and filters", async () => {
      for (const query of [
        {},
        { only_active: true },
        { status: 'submitted' },
        { job_submissions_limit: 0 },
        { include_jobs: false },
        { ascending: true },
      ] as Query[]) {
        const page = await list(t, u3, ALL_RUNS, { limit: 100, ...query });
        expect(page.items.map((x) => x.id).sort()).toEqual([...runs3].sort());
      }
    });

    it('a user with no projects sees an empty list', async () => {
      const loner = await t.user();
      expect(await list(t, loner, ALL_RUNS)).toEqual({ items: [], next_cursor: null });
    });

    it('GET /projects/{other}/runs by a non-member is 403; an unknown project is 404', async () => {
      const res = await t.http.get(projectRuns(p3)).set(u1.auth).expect(403);
      expect(res.body.code).toBe('FORBIDDEN');
      expect(res.body.message).not.toContain(runs3[0]);
      await t.http.get(projectRuns(p1)).set(u3.auth).query({ limit: 5, status: 'submitted' }).expect(403);
      const missing = await t.http
        .get(projectRuns(uniqueName('no-such-project')))
        .set(u1.auth)
        .expect(404);
      expect(missing.body.code).toBe('NOT_FOUND');
      // the member's own view of that project works
      const own = await list(t, u1, projectRuns(p2), { include_jobs: false });
      expect(own.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs2), false));
    });

    it("losing membership removes the project's runs from GET /runs at once", async () => {
      const p = (await makeProject(t, u2)).name;
      await setMembers(t, u2, p, [
        { user: u2.name, role: 'admin' },
        { user: u3.name, role: 'user' },
      ]);
      const ids = await makeRuns(t, u2, p, 2);
      const before = await list(t, u3, ALL_RUNS, { limit: 100, include_jobs: false });
      expect(before.items.map((x) => x.id).sort()).toEqual([...runs3, ...ids].sort());
      await setMembers(t, u2, p, [{ user: u2.name, role: 'admin' }]);
      const after = await list(t, u3, ALL_RUNS, { limit: 100, include_jobs: false });
      expect(after.items.map((x) => x.id).sort()).toEqual([...runs3].sort());
      await t.http.get(projectRuns(p)).set(u3.auth).expect(403);
    });

    it("a global admin sees runs of all projects, and any project's list", async () => {
      const admin = await t.user('admin');
      for (const user of [u1, u2, u3]) {
        const page = await list(t, admin, ALL_RUNS, { user: user.name, limit: 100 });
        const own: { id: string }[] = await t.dataSource.query(
          'SELECT id FROM runs WHERE user_id = $1 AND NOT deleted',
          [user.id],
        );
        expect(own.length).toBeGreaterThanOrEqual(2);
        expect(page.items.map((x) => x.id)).toEqual(
          sortKeys(
            await keysOf(
              t,
              own.map((x) => x.id),
            ),
            false,
          ),
        );
        expect(page.items.every((x) => x.user === user.name)).toBe(true);
      }
      const u3page = await list(t, admin, ALL_RUNS, { user: u3.name, limit: 100 });
      expect(u3page.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs3), false));
      const u1runs = await list(t, admin, ALL_RUNS, { user: u1.name, limit: 100, include_jobs: false });
      expect(u1runs.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, [...runs1, runs2[2]]), false));
      expect(new Set(u1runs.items.map((x) => x.project))).toEqual(new Set([p1, p2]));
      // unfiltered, everything in the database (not deleted), all pages
      const everything = await walk(t, admin, ALL_RUNS, { limit: 100, include_jobs: false });
      const rows: { id: string; submitted_at: Date }[] = await t.dataSource.query(
        'SELECT id, submitted_at FROM runs WHERE NOT deleted',
      );
      expect(everything.ids).toEqual(
        sortKeys(
          rows.map((x) => ({ id: x.id, at: x.submitted_at.toISOString() })),
          false,
        ),
      );
      for (const id of [...runs1, ...runs2, ...runs3]) expect(everything.ids).toContain(id);
      // an admin who is a member of none of them still reads each project's list
      for (const [p, runIds] of [
        [p1, runs1],
        [p3, runs3],
      ] as const) {
        const page = await list(t, admin, projectRuns(p), { include_jobs: false });
        expect(page.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, [...runIds]), false));
      }
    });

    it('needs a token (401) and a user or admin token (service accounts: 403)', async () => {
      const none = await t.http.get(ALL_RUNS).expect(401);
      expect(none.body.code).toBe('UNAUTHENTICATED');
      await t.http.get(projectRuns(p1)).expect(401);
      await t.http.get(ALL_RUNS).set({ Authorization: 'Bearer not-a-token' }).expect(401);
      const service = await t.user('service');
      const res = await t.http.get(ALL_RUNS).set(service.auth).expect(403);
      expect(res.body.code).toBe('FORBIDDEN');
      await t.http.get(projectRuns(p1)).set(service.auth).expect(403);
    });
  });

  describe('bad input', () => {
    let owner: TestUser;
    let project: string;
    beforeAll(async () => {
      owner = await t.user();
      project = (await makeProject(t, owner)).name;
      await makeRuns(t, owner, project, 2);
    });

    const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

    const BAD_QUERIES: [Query, string][] = [
      [{ limit: 0 }, 'limit'],
      [{ limit: 101 }, 'limit'],
      [{ limit: -1 }, 'limit'],
      [{ limit: 'abc' }, 'limit'],
      [{ limit: '1.5' }, 'limit'],
      [{ limit: '' }, 'limit'],
      [{ job_submissions_limit: 101 }, 'job_submissions_limit'],
      [{ job_submissions_limit: -1 }, 'job_submissions_limit'],
      [{ job_submissions_limit: 'abc' }, 'job_submissions_limit'],
      [{ job_submissions_limit: '2.5' }, 'job_submissions_limit'],
      [{ ascending: 'maybe' }, 'ascending'],
      [{ only_active: 'yes' }, 'only_active'],
      [{ include_jobs: 'nope' }, 'include_jobs'],
      [{ user: 'Not A Name' }, 'user'],
      [{ status: 'done,'.repeat(50) }, 'status'],
      [{ cursor: 'x'.repeat(1025) }, 'cursor'],
      [{ foo: 'bar' }, 'foo'],
      [{ job_submission_limit: 3 }, 'job_submission_limit'],
      [{ project: 'x' }, 'project'],
      [{ offset: 10 }, 'offset'],
    ];

    it.each(
      BAD_QUERIES.map(([query, field]): [string, Query, string] => [
        `${JSON.stringify(query).slice(0, 60)} (naming ${field})`,
        query,
        field,
      ]),
    )('%s is 400 VALIDATION_FAILED', async (_label, query, field) => {
      for (const url of [projectRuns(project), ALL_RUNS]) {
        const res = await t.http.get(url).set(owner.auth).query(query);
        expect({ url, query, status: res.status }).toEqual({ url, query, status: 400 });
        expect(res.body).toMatchObject({ status_code: 400, code: 'VALIDATION_FAILED' });
        expect(res.body.message).toContain(field);
        expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
      }
    });

    it('repeated parameters are 400, not 500', async () => {
      for (const qs of [
        'limit=2&limit=3',
        'job_submissions_limit=1&job_submissions_limit=2',
        'status=done&status=failed',
        'ascending=true&ascending=false',
      ]) {
        const res = await t.http.get(`${projectRuns(project)}?${qs}`).set(owner.auth);
        expect({ qs, status: res.status }).toEqual({ qs, status: 400 });
        expect(res.body.code).toBe('VALIDATION_FAILED');
      }
    });

    it.each<[string, string]>([
      ['garbage', 'not base64 JSON'],
      ['!!!', 'not base64url'],
      [b64('{"a":1}'), 'an object'],
      [b64([1, 2]), 'numbers'],
      [b64(['2024-01-01T00:00:00.000Z']), 'one key'],
      [b64(['2024-01-01T00:00:00.000Z', '00000000-0000-0000-0000-000000000000', 'x']), 'three keys'],
      [b64(['not a date', '00000000-0000-0000-0000-000000000000']), 'not a date'],
      [b64(['2024-01-01T00:00:00.000Z', 'not-a-uuid']), 'not a uuid'],
      [b64(['1', '00000000-0000-0000-0000-000000000000']), 'a date only JavaScript parses'],
    ])('cursor=%s (%s) is 400 naming the cursor, never 500', async (cursor) => {
      for (const url of [projectRuns(project), ALL_RUNS]) {
        for (const ascending of [false, true]) {
          const res = await t.http.get(url).set(owner.auth).query({ cursor, ascending });
          expect({ cursor, url, status: res.status }).toEqual({ cursor, url, status: 400 });
          expect(['INVALID_CURSOR', 'VALIDATION_FAILED']).toContain(res.body.code);
          expect(res.body.message).toMatch(/cursor/);
          expect(JSON.stringify(res.body)).not.toMatch(/SELECT|WHERE|syntax|uuid:|timestamp/i);
        }
      }
    });

    it('accepts boundary values: limit=1 and 100, job_submissions_limit=0 and 100, booleans true/false', async () => {
      for (const query of [
        { limit: 1 },
        { limit: 100 },
        { job_submissions_limit: 0 },
        { job_submissions_limit: 100 },
        { ascending: 'true', only_active: 'false', include_jobs: 'true' },
        { status: '' },
      ]) {
        const res = await t.http.get(projectRuns(project)).set(owner.auth).query(query);
        expect({ query, status: res.status }).toEqual({ query, status: 200 });
      }
    });
  });

  describe('constant number of SQL round trips, whatever the page and history hold', () => {
    let owner2: TestUser;
    let owner20: TestUser;
    let ownerDeep: TestUser;
    let p2: string;
    let p20: string;
    let pDeep: string;
    const SHALLOW_GAP = { mod: 4, rem: 3 };
    const body: RunBody = {
      jobs: [{ spec: jobSpec(), replicas: 2 }, { spec: jobSpec() }, { spec: jobSpec(), replicas: 2 }],
    }; // 5 jobs

    const jobIdsOf = async (runIds: string[]): Promise<string[]> =>
      (await t.dataSource.query('SELECT id FROM jobs WHERE run_id = ANY($1::uuid[])', [runIds])).map(
        (x: { id: string }) => x.id,
      );

    beforeAll(async () => {
      owner2 = await t.user();
      owner20 = await t.user();
      ownerDeep = await t.user();
      p2 = (await makeProject(t, owner2)).name;
      p20 = (await makeProject(t, owner20)).name;
      pDeep = (await makeProject(t, ownerDeep)).name;
      const runs2 = await makeRuns(t, owner2, p2, 2, body);
      const runs20 = await makeRuns(t, owner20, p20, 20, body);
      const runsDeep = await makeRuns(t, ownerDeep, pDeep, 2, body);
      await seriesHistory(t, await jobIdsOf([...runs2, ...runs20]), 14, SHALLOW_GAP); // 12 submissions each
      await seriesHistory(t, await jobIdsOf(runsDeep), 399, { mod: 4, rem: 1 }); // 300 submissions each
      expect(seriesNums(14, SHALLOW_GAP)).toHaveLength(12);
      expect(seriesNums(399, { mod: 4, rem: 1 })).toHaveLength(300);
      // one stopped run on each page, so cancellations are read too
      await stopRun(t, owner2, p2, runs2[0]);
      await stopRun(t, owner20, p20, runs20[3]);
      await stopRun(t, ownerDeep, pDeep, runsDeep[0]);
    });

    const cases: [string, Query][] = [
      ['N=5', { job_submissions_limit: 5 }],
      ['N omitted (10)', {}],
      ['N=0', { job_submissions_limit: 0 }],
      ['include_jobs=false', { include_jobs: false }],
      [
        'filtered, ascending',
        { job_submissions_limit: 3, ascending: true, status: 'submitted,terminated', only_active: false },
      ],
    ];

    it.each(cases)(
      '%s: a page of 2 runs and a page of 20 runs cost the same number of statements',
      async (_label, query) => {
        const results: { group: string; label: string; measured: Measured; page: Page }[] = [];
        for (const [group, label, user, url, q] of [
          ['project', '2 runs', owner2, projectRuns(p2), {}],
          ['project', '20 runs', owner20, projectRuns(p20), {}],
          ['project', '2 runs, deep histories', ownerDeep, projectRuns(pDeep), {}],
          ['all', '2 runs', owner2, ALL_RUNS, {}],
          ['all', '20 runs', owner20, ALL_RUNS, {}],
          ['all', '2 runs, deep histories', ownerDeep, ALL_RUNS, {}],
          ['all by user', '2 runs', owner2, ALL_RUNS, { user: owner2.name }],
          ['all by user', '20 runs', owner20, ALL_RUNS, { user: owner20.name }],
        ] as const) {
          let page: Page | undefined;
          const measured = await measure(t, async () => {
            page = await list(t, user, url, { limit: 20, ...query, ...q });
          });
          results.push({ group, label, measured, page: required(page, 'the page') });
        }
        const [small, big] = results;
        for (const r of results)
          expect({ label: `${r.group}, ${r.label}`, n: r.page.items.length }).toEqual({
            label: `${r.group}, ${r.label}`,
            n: r.label.startsWith('20') ? 20 : 2,
          });
        expect(small.page.items).toHaveLength(2);
        expect(big.page.items).toHaveLength(20);
        if (query.include_jobs === false) {
          for (const r of big.page.items) expect(r.jobs).toEqual([]);
        } else {
          const n = (query.job_submissions_limit as number | undefined) ?? 10;
          for (const r of big.page.items) {
            expect(r.jobs).toHaveLength(5);
            for (const j of r.jobs) {
              expect(nums(j)).toEqual(n === 0 ? [] : seriesNums(14, SHALLOW_GAP).slice(-n));
              expect(j.latest_job_submission?.submission_num).toBe(14);
            }
          }
        }
        const counts = results.map((r) => ({
          group: r.group,
          label: r.label,
          client: r.measured.client,
          runner: r.measured.runner,
          ds: r.measured.viaDataSource,
        }));
        // the counting sees every statement: auth, access, runs, names, (cancellations, jobs, submissions)
        expect(small.measured.client).toBeGreaterThan(3);
        expect(small.measured.runner).toBeGreaterThan(3);
        expect(small.measured.client).toBeGreaterThanOrEqual(small.measured.runner);
        expect(small.measured.runner).toBeGreaterThanOrEqual(small.measured.viaDataSource);
        for (const c of counts) {
          expect(c.client).toBeGreaterThan(3);
          const first = required(
            counts.find((x) => x.group === c.group),
            `the first count of ${c.group}`,
          );
          expect(c).toEqual({ ...first, label: c.label });
        }
        // no window function over submissions anywhere
        for (const r of results)
          for (const sql of r.measured.sql) expect(sql).not.toMatch(/\bover\s*\(|row_number|rank\s*\(/i);
      },
    );

    it('rows read from the database do not depend on the history stored (12 vs 300 submissions per job)', async () => {
      for (const n of [1, 5, 10, 100]) {
        const shallow = await measure(t, () => list(t, owner2, projectRuns(p2), { job_submissions_limit: n }));
        const deep = await measure(t, () => list(t, ownerDeep, projectRuns(pDeep), { job_submissions_limit: n }));
        expect(deep.client).toBe(shallow.client);
        if (n <= 12) {
          expect(deep.rows).toBe(shallow.rows);
          // 2 runs × 5 jobs × n submissions, plus the runs, the jobs, and a handful of lookups
          expect(deep.rows).toBeLessThanOrEqual(2 * 5 * n + 2 + 10 + 10);
        } else {
          // shallow jobs have only 12; deep ones give exactly n each
          expect(deep.rows - shallow.rows).toBe(2 * 5 * (n - 12));
        }
      }
    });

    // Under production-like statistics.
    it('job_submissions rows visited grow with jobs × N, not with the history stored (EXPLAIN ANALYZE)', async () => {
      // Production-like data: most jobs have a single submission, a few have piled-up retries; statistics fresh.
      const other = await t.user();
      const otherProject = (await makeProject(t, other)).name;
      await makeRun(t, other, otherProject, { jobs: [{ spec: jobSpec(), replicas: 5000 }] });
      await t.dataSource.query('ANALYZE jobs');
      await t.dataSource.query('ANALYZE job_submissions');
      const visits: { n: number; shallow: number; deep: number }[] = [];
      const expected: { n: number; shallow: number; deep: number }[] = [];
      for (const n of [0, 1, 2, 5, 10, 20]) {
        const shallow = await submissionRowsVisited(
          t,
          await measure(t, () => list(t, owner2, projectRuns(p2), { job_submissions_limit: n })),
        );
        const deep = await submissionRowsVisited(
          t,
          await measure(t, () => list(t, ownerDeep, projectRuns(pDeep), { job_submissions_limit: n })),
        );
        // n = 0 and 1 read each job's latest by primary key, deeper pages walk the history; either way one
        // statement per slice of the page's jobs (fetched over FETCH_PARTS connections at once).
        expect(shallow.statements).toBe(FETCH_PARTS);
        expect(deep.statements).toBe(FETCH_PARTS);
        visits.push({ n, shallow: shallow.visited, deep: deep.visited });
        // The walk touches each returned row twice (the max() probe that finds it, then the fetch): at most
        // 2 × runs × jobs × min(N, history) index entries, and the same for 12 or 300 submissions per job.
        const rows = (history: number) => 2 * 5 * Math.min(Math.max(n, 1), history);
        expected.push({ n, shallow: rows(12), deep: rows(300) });
      }
      for (const [i, v] of visits.entries()) {
        expect(v.shallow).toBeGreaterThanOrEqual(expected[i].shallow);
        // + one probe per job that finds the start of history
        expect(v.shallow).toBeLessThanOrEqual(2 * expected[i].shallow + 10);
        expect(v.deep).toBeGreaterThanOrEqual(expected[i].deep);
        expect(v.deep).toBeLessThanOrEqual(2 * expected[i].deep + 10);
        if (v.n <= 12) expect(v.deep).toBe(v.shallow); // history beyond N costs nothing
      }
    });

    it("the counting sees the list's own statements: runs and job_submissions reads, all that was sent", async () => {
      const m = await measure(t, () => list(t, owner2, projectRuns(p2), { job_submissions_limit: 5 }));
      // sanity: what we count is what the database saw; the statements include the list's own queries
      expect(m.sql.some((s) => /FROM "?runs"?/i.test(s))).toBe(true);
      expect(m.sql.some((s) => /job_submissions/i.test(s))).toBe(true);
      expect(m.sql.length).toBe(m.client);
    });
  });
});
