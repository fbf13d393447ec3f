import { DataSource } from 'typeorm';
import { FETCH_PARTS, LatestSubmissionsRepository } from '../../src/modules/jobs/latest-submissions.repository';
import type { SubmissionView } from '../../src/modules/jobs/dto/job-spec';
import { inRolledBackTransaction, openDataSource, seedJob, seedRun } from '../support/repository-tier';
import { measure, submissionRowsVisited } from '../support/sql-counting';
import {
  expectedSubmission,
  giveHistory,
  newestInDb,
  seriesHistory,
  seriesNums,
  WrittenSubmission,
} from '../support/submission-histories';
import { required } from '../../src/common/required';
import { Job } from '../../src/modules/jobs/entities/job.entity';
import { JobSubmission } from '../../src/modules/jobs/entities/job-submission.entity';
import { toJobView, toSubmissionView } from '../../src/modules/jobs/jobs.service';

/** The latest-submission fetch: for each job, its N newest existing submissions, in one statement for all jobs. */
describe('LatestSubmissionsRepository: the latest-submission fetch', () => {
  let ds: DataSource;
  let repo: LatestSubmissionsRepository;
  /** Jobs by their histories: 0,1,2,5,6,9 (gaps) · 0 only · 4,7 (history starting above 0) · 300 of 0..399. */
  let gappy: string;
  let single: string;
  let late: string;
  let deep: string;
  let written: WrittenSubmission[];
  const DEEP_GAP = { mod: 4, rem: 1 };
  const history: Record<string, number[]> = {};

  beforeAll(async () => {
    ds = await openDataSource();
    repo = new LatestSubmissionsRepository(ds);
    const { runId } = await seedRun(ds);
    [gappy, single, late, deep] = (await Promise.all([0, 1, 2, 3].map((n) => seedJob(ds, runId, 0, n)))).map(
      (j) => j.jobId,
    );
    const db = { dataSource: ds };
    written = await giveHistory(db, gappy, [0, 1, 2, 5, 6, 9]);
    await giveHistory(db, late, [4, 7]);
    await seriesHistory(db, [deep], 399, DEEP_GAP);
    Object.assign(history, {
      [gappy]: [0, 1, 2, 5, 6, 9],
      [single]: [0],
      [late]: [4, 7],
      [deep]: seriesNums(399, DEEP_GAP),
    });
    expect(history[deep]).toHaveLength(300);
  });
  afterAll(() => ds.destroy());

  const numsOf = (views: SubmissionView[] | undefined) => (views ?? []).map((v) => v.submission_num);
  const idsAndNums = (views: SubmissionView[] | undefined) =>
    (views ?? []).map((v) => ({ id: v.id, num: v.submission_num }));

  it.each([1, 2, 3, 6, 7, 100])(
    'n=%i: each job gets its n newest existing submissions (rows, not numbers), ascending',
    async (n) => {
      const ids = [gappy, single, late, deep];
      const got = await repo.latestPerJob(ids, n, 'all');
      expect([...got.keys()]).toEqual(ids);
      for (const id of ids) {
        expect({ id, nums: numsOf(got.get(id)) }).toEqual({ id, nums: history[id].slice(-n) });
        expect(idsAndNums(got.get(id))).toEqual(await newestInDb({ dataSource: ds }, id, n));
      }
    },
  );

  it('n = null: every submission of each job, ascending', async () => {
    const got = await repo.latestPerJob([deep, gappy], null, 'all');
    expect(numsOf(got.get(deep))).toEqual(history[deep]);
    expect(numsOf(got.get(gappy))).toEqual(history[gappy]);
  });

  it('n = 0 and no jobs: empty answers, and no statement sent', async () => {
    let zero: Map<string, SubmissionView[]> | undefined;
    let none: Map<string, SubmissionView[]> | undefined;
    const m = await measure({ dataSource: ds }, async () => {
      zero = await repo.latestPerJob([gappy, deep], 0, 'all');
      none = await repo.latestPerJob([], 5, 'all');
    });
    expect(zero).toEqual(
      new Map([
        [gappy, []],
        [deep, []],
      ]),
    );
    expect(none).toEqual(new Map());
    expect(m.client).toBe(0);
  });

  it('a job id with no rows maps to an empty list', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    const got = await repo.latestPerJob([unknown, single], 3, 'all');
    expect(numsOf(got.get(unknown))).toEqual([]);
    expect(numsOf(got.get(single))).toEqual([0]);
  });

  it('rows come back as the API shows them: ISO times in UTC with milliseconds, documents as stored', async () => {
    const got = required((await repo.latestPerJob([gappy], 6, 'all')).get(gappy), 'gappy');
    // The documents are raw JSON text (spliced into responses unparsed): serialised, they read as stored.
    expect(JSON.parse(JSON.stringify(got))).toEqual(
      written.map((w) => ({ ...expectedSubmission(gappy, w), cost_usd: 0 })),
    );
  });

  it("reads down from the job's latest_submission_num (its facts), never a higher number", async () => {
    await inRolledBackTransaction(ds, async (m) => {
      // A submission numbered above the facts' pointer (as if written but not yet pointed at) is not the job's.
      await m.query(
        `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, cpu, memory_mib)
         SELECT gen_random_uuid(), id, run_id, job_group_id, 12, 'submitted', 1, 1024 FROM jobs WHERE id = $1`,
        [gappy],
      );
      expect(numsOf((await repo.latestPerJob([gappy], 2, 'all', m)).get(gappy))).toEqual([6, 9]);
      expect(numsOf((await repo.latestPerJob([gappy], null, 'all', m)).get(gappy))).toEqual([0, 1, 2, 5, 6, 9, 12]);
    });
  });

  it('in a transaction: one statement; outside one: FETCH_PARTS statements; the same rows', async () => {
    const ids = [gappy, single, late, deep];
    const statementsOf = (sql: string[]) => sql.filter((s) => /job_submissions/.test(s)).length;
    let outside: Map<string, SubmissionView[]> | undefined;
    const pooled = await measure({ dataSource: ds }, async () => {
      outside = await repo.latestPerJob(ids, 4, 'all');
    });
    expect(statementsOf(pooled.sql)).toBe(FETCH_PARTS);
    await inRolledBackTransaction(ds, async (m) => {
      let inside: Map<string, SubmissionView[]> | undefined;
      const one = await measure({ dataSource: ds }, async () => {
        inside = await repo.latestPerJob(ids, 4, 'all', m);
      });
      expect(statementsOf(one.sql)).toBe(1);
      expect(JSON.stringify([...required(inside, 'inside')])).toBe(JSON.stringify([...required(outside, 'outside')]));
    });
  });

  it('visits N index entries per job whatever history holds: 300 submissions cost what 6 do', async () => {
    for (const n of [1, 2, 4, 6]) {
      const visited = async (jobId: string) =>
        (
          await submissionRowsVisited(
            { dataSource: ds },
            await measure({ dataSource: ds }, () => repo.latestPerJob([jobId], n, 'all')),
          )
        ).visited;
      const shallow = await visited(gappy);
      const deeper = await visited(deep);
      expect({ n, deeper }).toEqual({ n, deeper: shallow });
      // One index scan per job, stopping after its n newest.
      expect(shallow).toBeLessThanOrEqual(n);
    }
  });

  it("newestOf: each job's submission at the number its facts name; no row there, no entry", async () => {
    const got = await repo.newestOf(
      [
        { id: gappy, latestSubmissionNum: 9 },
        { id: late, latestSubmissionNum: 7 },
        { id: deep, latestSubmissionNum: 5 }, // folded away (5 % 4 = 1): no such row
        { id: single, latestSubmissionNum: 0 },
      ],
      'newest',
    );
    expect(Object.fromEntries([...got].map(([id, v]) => [id, v.submission_num]))).toEqual({
      [gappy]: 9,
      [late]: 7,
      [single]: 0,
    });
    expect(JSON.parse(JSON.stringify(got.get(gappy)))).toEqual({
      ...expectedSubmission(gappy, written[written.length - 1]),
      cost_usd: 0,
    });
    expect(await repo.newestOf([], 'newest')).toEqual(new Map());
  });

  describe('documents: which rows carry provisioning_data and runtime_data', () => {
    const docsOf = (views: SubmissionView[] | undefined) =>
      (views ?? []).map((v) => ({
        num: v.submission_num,
        documents: 'provisioning_data' in v && 'runtime_data' in v,
        absent: !('provisioning_data' in v) && !('runtime_data' in v),
      }));
    const shape = (nums: number[], withDocuments: (num: number, i: number) => boolean) =>
      nums.map((num, i) => ({ num, documents: withDocuments(num, i), absent: !withDocuments(num, i) }));

    it.each([3, null])("n=%p: 'newest' on each job's newest only, 'all' on every row, 'none' on none", async (n) => {
      const ids = [gappy, single, late];
      for (const documents of ['newest', 'all', 'none'] as const) {
        const got = await repo.latestPerJob(ids, n, documents);
        for (const id of ids) {
          const nums = n === null ? history[id] : history[id].slice(-n);
          const want = shape(nums, (_, i) => documents === 'all' || (documents === 'newest' && i === nums.length - 1));
          expect({ id, documents, rows: docsOf(got.get(id)) }).toEqual({ id, documents, rows: want });
        }
      }
    });

    it("'newest': the newest row's documents as stored, older rows otherwise the same as with 'all'", async () => {
      const all = required((await repo.latestPerJob([gappy], 3, 'all')).get(gappy), 'all');
      const newest = required((await repo.latestPerJob([gappy], 3, 'newest')).get(gappy), 'newest');
      const plain = (v: SubmissionView) => JSON.parse(JSON.stringify(v)) as Record<string, unknown>;
      expect(plain(newest[2])).toEqual(plain(all[2]));
      expect(plain(newest[2])).toMatchObject({ runtime_data: { job: gappy, num: 9 } });
      for (const i of [0, 1]) {
        // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the documents are what differs
        const { provisioning_data, runtime_data, ...rest } = plain(all[i]);
        expect(plain(newest[i])).toEqual(rest);
      }
    });

    it('views list the same fields in one order, with or without documents (so they share maps)', async () => {
      const head = ['id', 'submission_num', 'status', 'termination_reason', 'exit_status', 'submitted_at'];
      const withDocs = [...head, 'started_at', 'finished_at', 'provisioning_data', 'runtime_data', 'cost_usd'];
      const without = withDocs.filter((k) => k !== 'provisioning_data' && k !== 'runtime_data');
      const rows = required((await repo.latestPerJob([gappy], 2, 'newest')).get(gappy), 'newest');
      expect(rows.map((v) => Object.keys(v))).toEqual([without, withDocs]);
      const at = new Date();
      const entity = Object.assign(new JobSubmission(), {
        id: rows[1].id,
        submissionNum: 9,
        status: 'running',
        terminationReason: null,
        exitStatus: null,
        submittedAt: at,
        startedAt: at,
        finishedAt: null,
        provisioningData: {},
        runtimeData: null,
      });
      expect(Object.keys(toSubmissionView(entity))).toEqual(withDocs);
      const job = Object.assign(new Job(), { id: gappy, status: 'running', terminationReason: null });
      // The job's newest, last of the shown ones, comes again without its documents (toJobView's copy).
      expect(Object.keys(required(toJobView(job, rows, rows[1], null).latest_job_submission, 'latest'))).toEqual(
        without,
      );
    });

    it("newestOf: with the documents unless 'none'", async () => {
      const jobs = [{ id: gappy, latestSubmissionNum: 9 }];
      const none = required((await repo.newestOf(jobs, 'none')).get(gappy), 'none');
      const newest = required((await repo.newestOf(jobs, 'newest')).get(gappy), 'newest');
      const all = required((await repo.newestOf(jobs, 'all')).get(gappy), 'all');
      expect('provisioning_data' in none || 'runtime_data' in none).toBe(false);
      expect(JSON.parse(JSON.stringify(newest))).toEqual(JSON.parse(JSON.stringify(all)));
      expect(JSON.parse(JSON.stringify(newest))).toMatchObject({ provisioning_data: { attempt: 9 } });
    });
  });
});
