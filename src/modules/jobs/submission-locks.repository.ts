import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { HELD_PREDICATE, JobSubmission, RUNNING_PREDICATE } from './entities/job-submission.entity';
import {
  JOB_FACTS,
  type JobFacts,
  type LockedRow,
  splitLocked,
  SUBMISSION_FACTS,
  type SubmissionFacts,
} from './submission-rows';

/** Who holds a submission, where it stands, and the database's clock (to judge grace periods by). */
export type HolderFacts = Pick<
  JobSubmission,
  'id' | 'jobId' | 'runId' | 'submissionNum' | 'status' | 'workerId' | 'claimedByUserId' | 'finishedAt'
> & { now: Date };

/** Reads and locks of submissions (and their jobs) that the lifecycle decides on before it writes. */
@Injectable()
export class SubmissionLocksRepository {
  /** Submissions by id (unknown ids left out), locked in id order: a batch's locks always come in one order. */
  async lockSubmissions(m: EntityManager, ids: string[]): Promise<SubmissionFacts[]> {
    if (ids.length === 0) return [];
    return preparedQuery<SubmissionFacts>(
      m,
      'lifecycle_lock_submissions',
      `SELECT ${SUBMISSION_FACTS} FROM job_submissions s WHERE s.id = ANY($1::uuid[]) ORDER BY s.id FOR UPDATE OF s`,
      [ids],
    );
  }

  /** The submission, locked. */
  async lockSubmission(m: EntityManager, id: string): Promise<SubmissionFacts | null> {
    const rows = await preparedQuery<SubmissionFacts>(
      m,
      'lifecycle_lock_submission',
      `SELECT ${SUBMISSION_FACTS} FROM job_submissions s WHERE s.id = $1 FOR UPDATE OF s`,
      [id],
    );
    return rows[0] ?? null;
  }

  /**
   * Who holds the submission and where it stands, read without a lock: a claimed submission's holder never changes,
   * and a status that moves on meanwhile only ends a grace period a moment later or earlier.
   */
  async holderFacts(m: EntityManager, id: string): Promise<HolderFacts | null> {
    const rows = await preparedQuery<HolderFacts>(
      m,
      'lifecycle_holder_facts',
      `SELECT s.id, s.job_id AS "jobId", s.run_id AS "runId", s.submission_num AS "submissionNum", s.status,
              s.worker_id AS "workerId", s.claimed_by_user_id AS "claimedByUserId", s.finished_at AS "finishedAt",
              now() AS "now"
         FROM job_submissions s WHERE s.id = $1`,
      [id],
    );
    return rows[0] ?? null;
  }

  /**
   * The submission and its job, both locked in one round trip, submission first (FOR UPDATE OF locks each joined
   * row in the order named, the order every lifecycle transaction takes).
   */
  async lockWithJob(m: EntityManager, id: string): Promise<{ submission: SubmissionFacts; job: JobFacts } | null> {
    const rows = await preparedQuery<LockedRow>(
      m,
      'lifecycle_lock_submission_with_job',
      `SELECT ${SUBMISSION_FACTS}, ${JOB_FACTS}
         FROM job_submissions s JOIN jobs j ON j.id = s.job_id
        WHERE s.id = $1
          FOR UPDATE OF s, j`,
      [id],
    );
    return rows.length === 0 ? null : splitLocked(rows[0]);
  }

  /**
   * Many submissions with their jobs, locked in one round trip in submission id order (each submission, then its
   * job, as lockWithJob); unknown ids are left out. Two batches lock their rows in one order.
   */
  async lockWithJobs(
    m: EntityManager,
    ids: string[],
  ): Promise<Map<string, { submission: SubmissionFacts; job: JobFacts }>> {
    if (ids.length === 0) return new Map();
    const rows = await preparedQuery<LockedRow>(
      m,
      'lifecycle_lock_submissions_with_jobs',
      `SELECT ${SUBMISSION_FACTS}, ${JOB_FACTS}
         FROM job_submissions s JOIN jobs j ON j.id = s.job_id
        WHERE s.id = ANY($1::uuid[])
        ORDER BY s.id
          FOR UPDATE OF s, j`,
      [ids],
    );
    return new Map(rows.map((r) => [r.id, splitLocked(r)]));
  }

  /** Which of the given jobs are always_run. */
  async alwaysRunJobs(m: EntityManager, jobIds: string[]): Promise<Set<string>> {
    if (jobIds.length === 0) return new Set();
    const rows: { id: string }[] = await m.query(`SELECT id FROM jobs WHERE id = ANY($1::uuid[]) AND always_run`, [
      jobIds,
    ]);
    return new Set(rows.map((r) => r.id));
  }

  /** Running submissions past their job's max_duration_s, oldest deadline first, locked (skipping locked ones). */
  async lockOverdue(m: EntityManager, limit: number): Promise<JobSubmission[]> {
    return m
      .getRepository(JobSubmission)
      .createQueryBuilder('s')
      .where(`s.${RUNNING_PREDICATE} AND s.deadline_at IS NOT NULL AND s.deadline_at < now()`)
      .orderBy('s.deadline_at')
      .limit(limit)
      .setLock('pessimistic_write')
      .setOnLocked('skip_locked')
      .getMany();
  }

  /** Claimed or running submissions whose worker stopped renewing the lease, locked. */
  async lockLapsed(m: EntityManager, limit: number): Promise<JobSubmission[]> {
    return m
      .getRepository(JobSubmission)
      .createQueryBuilder('s')
      .where(`s.${HELD_PREDICATE} AND s.lease_expires_at < now()`)
      .orderBy('s.lease_expires_at')
      .limit(limit)
      .setLock('pessimistic_write')
      .setOnLocked('skip_locked')
      .getMany();
  }
}
