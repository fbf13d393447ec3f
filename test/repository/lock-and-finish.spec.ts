import { Client } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { SubmissionsRepository } from '../../src/modules/jobs/submissions.repository';
import type { SubmissionStatus } from '../../src/modules/lifecycle/vocabulary';
import {
  inRolledBackTransaction,
  lockableNow,
  openDataSource,
  openTransaction,
  otherSession,
  seedJob,
  seedRun,
} from '../support/repository-tier';
import { describeRealPostgres, uniqueName } from '../support/test-app';

/**
 * The one-statement lock and finish: locks the reports' submissions and their jobs, and finishes each only when
 * the caller holds the submission (worker id and account), its status allows the outcome, and it is the job's
 * latest; otherwise it changes nothing, but still returns the facts and keeps both rows locked for the caller to
 * decide why.
 */
describe('SubmissionsRepository.lockAndFinish', () => {
  let ds: DataSource;
  const repo = new SubmissionsRepository();
  /** One report: the facts and whether it finished, or null for an unknown submission. */
  const finishOne = async (
    m: EntityManager,
    id: string,
    holder: { workerId: string; userId: string },
    from: SubmissionStatus[],
    status: SubmissionStatus,
    reason: string,
    exitStatus: number,
  ) =>
    (await repo.lockAndFinish(m, [id], [{ id, holder, status, reason, exitStatus, runtimeData: null, from }])).get(
      id,
    ) ?? null;
  const FROM_STARTED: SubmissionStatus[] = ['running', 'terminating'];
  const DONE = { status: 'done', reason: 'done_by_runner' } as const;
  beforeAll(async () => {
    ds = await openDataSource();
  });
  afterAll(() => ds.destroy());

  /**
   * A job whose submission 0 failed and whose submission 1 (its latest) is `status`, held by worker w-1 of a
   * service account; returns the ids.
   */
  const seed = async (m: EntityManager | DataSource, status: SubmissionStatus = 'running') => {
    const run = await seedRun(m);
    const [service] = await m.query(`INSERT INTO users (name, global_role) VALUES ($1, 'service') RETURNING id`, [
      uniqueName('svc'),
    ]);
    const job = await seedJob(m, run.runId, 0, 0, { status: 'failed', workerId: 'w-0', claimedByUserId: service.id });
    await m.query(
      `UPDATE job_submissions SET termination_reason = 'container_exited_with_error', finished_at = now()
        WHERE id = $1`,
      [job.submissionId],
    );
    const [latest] = await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, cpu, memory_mib, gpu,
                                    worker_id, claimed_by_user_id, claimed_at, started_at, lease_expires_at)
       VALUES (gen_random_uuid(), $1, $2, 0, 1, $3, 1, 1024, 0, 'w-1', $4, now(), now(), now() + interval '1 minute')
       RETURNING id`,
      [job.jobId, run.runId, status, service.id],
    );
    await m.query(
      `UPDATE jobs SET latest_submission_id = $2, latest_submission_num = 1, submission_count = 2, status = $3
        WHERE id = $1`,
      [job.jobId, latest.id, status],
    );
    return { jobId: job.jobId, first: job.submissionId, latest: latest.id as string, serviceId: service.id as string };
  };

  /** Both rows in full (as text, so every column counts). */
  const rows = async (m: EntityManager, s: { jobId: string }) => {
    const [job] = await m.query(`SELECT row_to_json(j)::text AS row FROM jobs j WHERE id = $1`, [s.jobId]);
    const subs = await m.query(
      `SELECT row_to_json(s)::text AS row FROM job_submissions s WHERE job_id = $1 ORDER BY submission_num`,
      [s.jobId],
    );
    return { job: job.row as string, subs: subs.map((r: { row: string }) => r.row) };
  };

  it('finishes the submission and its job in one statement when holder, status and latest all match', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const s = await seed(m);
      const before = await rows(m, s);
      const got = await finishOne(
        m,
        s.latest,
        { workerId: 'w-1', userId: s.serviceId },
        FROM_STARTED,
        'done',
        'done_by_runner',
        0,
      );
      expect(got).toMatchObject({
        finished: true,
        // The facts as they were before.
        submission: {
          id: s.latest,
          status: 'running',
          workerId: 'w-1',
          claimedByUserId: s.serviceId,
          submissionNum: 1,
        },
        job: { id: s.jobId, latestSubmissionId: s.latest, latestSubmissionNum: 1, submissionCount: 2 },
      });
      const [sub] = await m.query(
        `SELECT status, termination_reason, exit_status, finished_at = now() AS finished_now, lease_expires_at,
                worker_id, claimed_by_user_id, started_at IS NOT NULL AS started
           FROM job_submissions WHERE id = $1`,
        [s.latest],
      );
      expect(sub).toEqual({
        status: 'done',
        termination_reason: 'done_by_runner',
        exit_status: 0,
        finished_now: true,
        lease_expires_at: null,
        worker_id: 'w-1',
        claimed_by_user_id: s.serviceId,
        started: true,
      });
      const [job] = await m.query(
        `SELECT status, termination_reason, completion_counted, latest_submission_id, submission_count
           FROM jobs WHERE id = $1`,
        [s.jobId],
      );
      expect(job).toEqual({
        status: 'done',
        termination_reason: 'done_by_runner',
        completion_counted: true,
        latest_submission_id: s.latest,
        submission_count: 2,
      });
      // Submission 0 is untouched.
      expect((await rows(m, s)).subs[0]).toBe(before.subs[0]);
    });
  });

  interface Refused {
    /** Which submission the report names. */
    which: 'latest' | 'first';
    workerId: string;
    /** Another account than the one that claimed. */
    otherAccount?: boolean;
    from: SubmissionStatus[];
    status: SubmissionStatus;
    reason: string;
  }
  it.each<[string, Refused]>([
    ['another worker id of the same account', { which: 'latest', workerId: 'w-2', from: FROM_STARTED, ...DONE }],
    [
      'the same worker id under another account',
      { which: 'latest', workerId: 'w-1', otherAccount: true, from: FROM_STARTED, ...DONE },
    ],
    [
      'a status the outcome is not allowed from (running, for an outcome allowed from provisioning only)',
      { which: 'latest', workerId: 'w-1', from: ['provisioning'], status: 'failed', reason: 'executor_error' },
    ],
    [
      'a submission that is no longer the job’s latest (even with its holder and status allowed)',
      { which: 'first', workerId: 'w-0', from: ['failed', ...FROM_STARTED], ...DONE },
    ],
  ])('changes nothing for %s, and says so with the facts as they are', async (_label, r) => {
    await inRolledBackTransaction(ds, async (m) => {
      const s = await seed(m);
      const before = await rows(m, s);
      const id = r.which === 'latest' ? s.latest : s.first;
      const userId = r.otherAccount ? '00000000-0000-4000-8000-000000000000' : s.serviceId;
      const got = await finishOne(m, id, { workerId: r.workerId, userId }, r.from, r.status, r.reason, 0);
      expect(got).toMatchObject({
        finished: false,
        submission: { id },
        job: { id: s.jobId, latestSubmissionId: s.latest },
      });
      expect(await rows(m, s)).toEqual(before);
    });
  });

  it('changes nothing for a submission already finished (a repeated report)', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const s = await seed(m);
      const holder = { workerId: 'w-1', userId: s.serviceId };
      await finishOne(m, s.latest, holder, FROM_STARTED, 'done', 'done_by_runner', 0);
      const before = await rows(m, s);
      const again = await finishOne(m, s.latest, holder, FROM_STARTED, 'failed', 'executor_error', 1);
      expect(again).toMatchObject({
        finished: false,
        submission: { status: 'done', terminationReason: 'done_by_runner' },
      });
      expect(await rows(m, s)).toEqual(before);
    });
  });

  it('several reports in one statement: each finished or left as it stands, on its own', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = await seed(m);
      const b = await seed(m);
      const holder = { workerId: 'w-1', userId: a.serviceId };
      const report = (id: string, from: SubmissionStatus[]) => ({
        id,
        holder,
        ...DONE,
        exitStatus: 0,
        runtimeData: { wall_s: 1 },
        from,
      });
      // b's account is another one: its report is refused, a's goes through.
      const got = await repo.lockAndFinish(
        m,
        [a.latest, b.latest, b.first],
        [report(a.latest, FROM_STARTED), report(b.latest, FROM_STARTED)],
      );
      expect([...got.keys()].sort()).toEqual([a.latest, b.latest, b.first].sort());
      expect([a.latest, b.latest, b.first].map((id) => got.get(id)?.finished)).toEqual([true, false, false]);
      const statuses = await m.query(
        `SELECT id, status, runtime_data::text AS data FROM job_submissions WHERE id = ANY($1::uuid[])`,
        [[a.latest, b.latest]],
      );
      expect(
        Object.fromEntries(
          statuses.map((r: { id: string; status: string; data: string }) => [r.id, [r.status, r.data]]),
        ),
      ).toEqual({
        [a.latest]: ['done', '{"wall_s":1}'],
        [b.latest]: ['running', null],
      });
    });
  });

  it('an unknown submission: null', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      expect(
        await finishOne(
          m,
          '00000000-0000-4000-8000-000000000000',
          { workerId: 'w-1', userId: '00000000-0000-4000-8000-000000000000' },
          FROM_STARTED,
          'done',
          'done_by_runner',
          0,
        ),
      ).toBeNull();
    });
  });

  describeRealPostgres('locks (real PostgreSQL: another session)', () => {
    let other: Client;
    beforeAll(async () => {
      other = await otherSession();
    });
    afterAll(() => other.end());

    it.each([
      ['when it finishes them', 'w-1'],
      ['when it changes nothing (another worker id)', 'w-2'],
    ])('holds the submission and its job locked until the transaction ends, %s', async (_label, workerId) => {
      const s = await ds.transaction((m) => seed(m));
      const lockable = async () => [
        await lockableNow(other, 'SELECT 1 FROM job_submissions WHERE id = $1', [s.latest]),
        await lockableNow(other, 'SELECT 1 FROM jobs WHERE id = $1', [s.jobId]),
        await lockableNow(other, 'SELECT 1 FROM job_submissions WHERE id = $1', [s.first]),
      ];
      const tx = await openTransaction(ds);
      try {
        const got = await finishOne(
          tx.manager,
          s.latest,
          { workerId, userId: s.serviceId },
          FROM_STARTED,
          'done',
          'done_by_runner',
          0,
        );
        expect(got?.finished).toBe(workerId === 'w-1');
        // The latest submission and the job are held; the job's older submission is not.
        expect(await lockable()).toEqual([false, false, true]);
      } finally {
        await tx.rollbackTransaction();
        await tx.release();
      }
      expect(await lockable()).toEqual([true, true, true]);
    });
  });
});
