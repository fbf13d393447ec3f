import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun, RunBody } from '../support/factories';
import { Page, Query } from '../support/run-views';
import { seriesHistory, seriesNums } from '../support/submission-histories';
import { ALL_RUNS, list, makeRuns, nums, projectRuns, stopRun } from '../support/runs-list';
import { measure, Measured, submissionRowsVisited } from '../support/sql-counting';
import { FETCH_PARTS } from '../../src/modules/jobs/latest-submissions.repository';
import { required } from '../../src/common/required';

/*
 * The runs list costs what it returns: a constant number of SQL statements per page, and rows read that do
 * not depend on the history stored.
 */
describe('runs list', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

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
          // Unmeasured first: the token cache (UsersService) expires after 10 s, so without it whether a
          // request found them warm depended on how long the previous ones took.
          await list(t, user, url, { limit: 20, ...query, ...q });
          const measured = await measure(t, async () => {
            page = await list(t, user, url, { limit: 20, ...query, ...q });
          });
          results.push({ group, label, measured, page: required(page, 'page') });
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
            'first count',
          );
          expect(c).toEqual({ ...first, label: c.label });
        }
        // no window function over submissions anywhere
        for (const r of results)
          for (const sql of r.measured.sql) expect(sql).not.toMatch(/\bover\s*\(|row_number|rank\s*\(/i);
      },
    );

    it('rows read do not depend on the history stored (12 vs 300 submissions per job)', async () => {
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

    it('job_submissions rows visited grow with jobs × N, not with history (EXPLAIN ANALYZE)', async () => {
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
        // n = 0 and 1 read each job's latest by its number, deeper pages read down the history index from it;
        // either way one statement per slice of the page's jobs (fetched over FETCH_PARTS connections at once).
        expect(shallow.statements).toBe(FETCH_PARTS);
        expect(deep.statements).toBe(FETCH_PARTS);
        visits.push({ n, shallow: shallow.visited, deep: deep.visited });
        // Each returned row is one index entry and one row read: runs × jobs × min(N, history), at most twice that
        // (the bound a walk probing each step would need), and the same for 12 or 300 submissions per job.
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

    it("the counting sees the list's own statements: runs and job_submissions reads, all of them", async () => {
      const m = await measure(t, () => list(t, owner2, projectRuns(p2), { job_submissions_limit: 5 }));
      // sanity: what we count is what the database saw; the statements include the list's own queries
      expect(m.sql.some((s) => /FROM "?runs"?/i.test(s))).toBe(true);
      expect(m.sql.some((s) => /job_submissions/i.test(s))).toBe(true);
      expect(m.sql.length).toBe(m.client);
    });
  });
});
