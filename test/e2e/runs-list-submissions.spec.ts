import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { hasDocuments, Query, RunView, withoutDocuments } from '../support/run-views';
import {
  expectedSubmission,
  giveHistory,
  newestInDb,
  seriesHistory,
  seriesNums,
  submittedAtOf,
  WrittenSubmission,
} from '../support/submission-histories';
import { ALL_RUNS, list, nums, projectRuns, setRunStatus, stopRun } from '../support/runs-list';
import { required } from '../../src/common/required';

/*
 * The runs list's job_submissions_limit: the N newest existing submissions of every job, gaps in the numbering
 * included. Histories are written in SQL (test/support/submission-histories.ts).
 */
describe('runs list', () => {
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
      untouchedSubId = required(run.jobs[1].latest_job_submission, 'latest').id;
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
        const full = (num: number) => ({
          ...expectedSubmission(gappy.jobId, required(byNum.get(num), `submission ${num}`)),
          cost_usd: undefined,
        });
        // By default only the newest carries its documents; the older ones come without both fields.
        expect(job.job_submissions.map((s) => ({ ...s, cost_usd: undefined }))).toEqual(
          expected.map((num, i) => (i === expected.length - 1 ? full(num) : withoutDocuments(full(num)))),
        );
        expect(job.job_submissions.map(hasDocuments)).toEqual(expected.map((_, i) => i === expected.length - 1));
        for (const s of job.job_submissions) expect(typeof s.cost_usd).toBe('number');
        // latest_job_submission is the newest submission, its documents left to job_submissions' last item
        expect(job.latest_job_submission).toEqual(withoutDocuments(required(job.job_submissions.at(-1), 'newest')));
        expect(hasDocuments(required(job.latest_job_submission, 'latest'))).toBe(false);
        expect(job.latest_job_submission?.submission_num).toBe(9);
        // submission_data=all: every shown submission in full
        const all = (await onlyRun({ job_submissions_limit: n, submission_data: 'all' }, url)).jobs[0];
        expect(all.job_submissions.map((s) => ({ ...s, cost_usd: undefined }))).toEqual(expected.map(full));
        expect(all.latest_job_submission).toEqual(job.latest_job_submission);
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

    it('N=0: every job, no job_submissions, latest_job_submission still set; the run keeps its status', async () => {
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
          // the same newest submission as with N=1, where job_submissions carries its documents instead
          const withOne = await onlyRun({ job_submissions_limit: 1 }, url);
          expect(run.jobs.map((j) => j.latest_job_submission)).toEqual(withOne.jobs.map((j) => j.job_submissions[0]));
          expect(run.jobs.map((j) => withoutDocuments(required(j.latest_job_submission, 'latest')))).toEqual(
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
            expect(j.latest_job_submission).toEqual(withoutDocuments(required(j.job_submissions.at(-1), 'newest')));
            expect(j.submission_count).toBe(h[h.length - 1] + 1);
            const own = required(written.get(j.id), 'written job');
            if (own.length > 0) {
              const ownIds = new Set(own.map((s) => s.id));
              for (const s of j.job_submissions) expect(ownIds.has(s.id)).toBe(true);
              // the newest one's documents only (the default)
              expect(j.job_submissions.map((s) => s.runtime_data)).toEqual(
                h.slice(-n).map((num, i, shown) => (i === shown.length - 1 ? { job: j.id, num } : undefined)),
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
});
