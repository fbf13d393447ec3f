import { DataSource } from 'typeorm';
import { JobPagesRepository, type JobListFilter } from '../../src/modules/jobs/job-pages.repository';
import { openDataSource, seedRun } from '../support/repository-tier';
import { measure, rowsVisited } from '../support/sql-counting';

/**
 * Pages of a run's jobs read what they return, wherever in the run the jobs lie: a group whose jobs were added after
 * many others, a subtree of several groups, a cursor deep into the run. (A filter on the run's one ordered walk read
 * every job numbered before the page: 620,000 rows for a page of a group added late to a 1,000,000-job run.)
 */
describe('JobPagesRepository: pages of a big run read what they show', () => {
  let ds: DataSource;
  let repo: JobPagesRepository;
  let runId: string;
  /** Group 1: jobs 0..EARLY-1; then groups 2 and 3 alternate on job_nums EARLY.. (LATE each); 4: nothing. */
  const EARLY = 20_000;
  const LATE = 150;
  const LIMIT = 50;
  const page = (f: Partial<JobListFilter>) =>
    repo.listJobs(runId, {
      statuses: [],
      terminatedGroups: [],
      abortedGroups: [],
      abortOverGroups: [],
      limit: LIMIT,
      ...f,
    });
  const keys = (jobs: { jobNum: number; replicaNum: number }[]) => jobs.map((j) => [j.jobNum, j.replicaNum]);

  beforeAll(async () => {
    ds = await openDataSource();
    repo = new JobPagesRepository(ds);
    ({ runId } = await seedRun(ds, { 1: 0, 2: 1, 3: 1, 4: 0 }));
    const seed = (groupSql: string, from: number, n: number) =>
      ds.query(
        `INSERT INTO jobs (id, run_id, job_group_id, job_num, replica_num, job_name, spec, status,
                           latest_submission_id, latest_submission_num, submission_count)
         SELECT gen_random_uuid(), $1, ${groupSql}, k, 0, 'j', '{"commands": ["true"]}', 'submitted',
                gen_random_uuid(), 0, 1
           FROM generate_series($2::int, $2::int + $3::int - 1) AS k`,
        [runId, from, n],
      );
    await seed('1', 0, EARLY);
    await seed('CASE WHEN k % 2 = 0 THEN 2 ELSE 3 END', EARLY, 2 * LATE);
    await ds.query('ANALYZE jobs');
  });
  afterAll(() => ds.destroy());

  /** The page and the rows of `jobs` its statement visited. */
  const measured = async (f: Partial<JobListFilter>) => {
    let rows: Awaited<ReturnType<typeof page>> = [];
    const m = await measure({ dataSource: ds }, async () => (rows = await page(f)));
    return { rows, visited: (await rowsVisited(ds, m, 'jobs')).visited };
  };

  it("a group added late: its first page, without reading the run's earlier jobs", async () => {
    const { rows, visited } = await measured({ groupIds: [2] });
    expect(keys(rows)).toEqual(Array.from({ length: LIMIT }, (_, i) => [EARLY + 2 * i, 0]));
    expect(rows.every((j) => j.jobGroupId === 2)).toBe(true);
    expect(visited).toBeLessThanOrEqual(LIMIT + 1);
  });

  it('a subtree: the groups merged in job order, each walked at most a page deep, an empty group too', async () => {
    const { rows, visited } = await measured({ groupIds: [2, 3, 4], after: [EARLY + 9, 0] });
    expect(keys(rows)).toEqual(Array.from({ length: LIMIT }, (_, i) => [EARLY + 10 + i, 0]));
    expect(visited).toBeLessThanOrEqual(3 * (LIMIT + 1));
  });

  it('every job of a subtree, page by page, in order, once each', async () => {
    const seen: number[][] = [];
    let after: [number, number] | undefined;
    for (;;) {
      const rows = await page({ groupIds: [3, 2], after });
      seen.push(...keys(rows));
      if (rows.length < LIMIT) break;
      const last = rows[rows.length - 1];
      after = [last.jobNum, last.replicaNum];
    }
    expect(seen).toEqual(Array.from({ length: 2 * LATE }, (_, i) => [EARLY + i, 0]));
  });

  it('a cursor deep into the whole run starts the walk there (a row comparison, not a filter)', async () => {
    const { rows, visited } = await measured({ after: [EARLY - 10, 0] });
    expect(keys(rows)).toEqual(Array.from({ length: LIMIT }, (_, i) => [EARLY - 9 + i, 0]));
    expect(visited).toBeLessThanOrEqual(LIMIT + 1);
  });

  it('a status filter sees effective statuses: uncounted jobs below a cancellation show as cancelled', async () => {
    const shown = await page({ groupIds: [2, 3], terminatedGroups: [3], statuses: ['terminated'] });
    expect(shown).toHaveLength(LIMIT);
    expect(shown.every((j) => j.jobGroupId === 3)).toBe(true);
    const queued = await page({ groupIds: [2, 3], terminatedGroups: [3], statuses: ['submitted'] });
    expect(queued.every((j) => j.jobGroupId === 2)).toBe(true);
  });

  it('rows come without their spec', async () => {
    const [job] = await page({ groupIds: [2] });
    expect(job).not.toHaveProperty('spec');
    expect(job).toMatchObject({ runId, jobGroupId: 2, status: 'submitted', latestSubmissionNum: 0 });
  });
});
