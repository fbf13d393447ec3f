import { Injectable } from '@nestjs/common';
import { timeOrderedUuid } from '../../common/ids/time-ordered-uuid';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { returning } from '../../infra/database/returning';
import type { SubmissionStatus } from './dto/job-spec';
import { QUEUED_PREDICATE } from './entities/job-submission.entity';
import {
  JOB_FACTS,
  type JobFacts,
  type LockedRow,
  QUEUED,
  splitLocked,
  SUBMISSION_FACTS,
  type SubmissionFacts,
} from './submission-rows';

/** How attempts end: finishing submissions and jobs, retries and folded history, terminating queued ones. */
@Injectable()
export class SubmissionsRepository {
  /**
   * A final report in one round trip: locks the submission and its job (in that order, as lockWithJob) and, if
   * `workerId` under the account `userId` holds the submission, its status is one of `fromStatuses` (those the
   * state machine allows this outcome from: never a finished one) and it is the job's latest, finishes both, the job
   * counted. Returns the facts as they were before, and whether it finished them (if not, the caller tells why).
   */
  async finishIfLatest(
    m: EntityManager,
    id: string,
    holder: { workerId: string; userId: string },
    fromStatuses: readonly SubmissionStatus[],
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
    runtimeData: Record<string, unknown> | null = null,
  ): Promise<{ submission: SubmissionFacts; job: JobFacts; finished: boolean } | null> {
    const rows = await preparedQuery<LockedRow & { finished: boolean }>(
      m,
      'lifecycle_finish_if_latest',
      `WITH t AS (
         SELECT ${SUBMISSION_FACTS}, ${JOB_FACTS}
           FROM job_submissions s JOIN jobs j ON j.id = s.job_id
          WHERE s.id = $1
            FOR UPDATE OF s, j
       ), finished AS (
         UPDATE job_submissions s
            SET status = $3, termination_reason = $4, exit_status = $5, finished_at = now(), lease_expires_at = NULL,
                runtime_data = coalesce($8::json, s.runtime_data)
           FROM t
          WHERE s.id = t.id AND t."workerId" = $2 AND t."claimedByUserId" = $7 AND t.status = ANY($6::text[])
            AND t."latestSubmissionId" = t.id
      RETURNING s.job_id
       ), job_finished AS (
         UPDATE jobs j SET status = $3, termination_reason = $4, completion_counted = true FROM finished f
           WHERE j.id = f.job_id
      RETURNING j.id
       )
       SELECT t.*, EXISTS (SELECT 1 FROM job_finished) AS finished FROM t`,
      [
        id,
        holder.workerId,
        status,
        reason,
        exitStatus,
        fromStatuses,
        holder.userId,
        runtimeData === null ? null : JSON.stringify(runtimeData),
      ],
    );
    if (rows.length === 0) return null;
    const { finished, ...row } = rows[0];
    return { ...splitLocked(row), finished };
  }

  async finishSubmission(
    m: EntityManager,
    id: string,
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
  ): Promise<void> {
    await m.query(
      `UPDATE job_submissions SET status = $2, termination_reason = $3, exit_status = $4, finished_at = now(),
         lease_expires_at = NULL WHERE id = $1`,
      [id, status, reason, exitStatus],
    );
  }

  /** The job's final state (no retry): its facts follow the finished submission. */
  async finishJob(
    m: EntityManager,
    jobId: string,
    status: SubmissionStatus,
    reason: string,
    counted: boolean,
  ): Promise<void> {
    await m.query(`UPDATE jobs SET status = $2, termination_reason = $3, completion_counted = $4 WHERE id = $1`, [
      jobId,
      status,
      reason,
      counted,
    ]);
  }

  /** A final attempt: the submission and its job's facts finished in one statement (both rows already locked). */
  async finishSubmissionAndJob(
    m: EntityManager,
    id: string,
    jobId: string,
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
    counted: boolean,
  ): Promise<void> {
    await preparedQuery(
      m,
      'lifecycle_finish_submission_and_job',
      `WITH finished AS (
         UPDATE job_submissions SET status = $3, termination_reason = $4, exit_status = $5, finished_at = now(),
           lease_expires_at = NULL
          WHERE id = $1
       )
       UPDATE jobs SET status = $3, termination_reason = $4, completion_counted = $6 WHERE id = $2`,
      [id, jobId, status, reason, exitStatus, counted],
    );
  }

  /** The next submission of a retried job, and the job's facts pointing at it. */
  async insertRetry(
    m: EntityManager,
    job: JobFacts,
    prev: SubmissionFacts,
  ): Promise<{ id: string; submissionNum: number }> {
    const id = timeOrderedUuid();
    const submissionNum = job.latestSubmissionNum + 1;
    await m.query(
      `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, priority, cpu,
                                    memory_mib, gpu, needs_container)
       VALUES ($1, $2, $3, $4, $5, $10, $6, $7, $8, $9, $11)`,
      [
        id,
        job.id,
        job.runId,
        job.jobGroupId,
        submissionNum,
        prev.priority,
        prev.cpu,
        prev.memoryMib,
        prev.gpu,
        QUEUED,
        prev.needsContainer,
      ],
    );
    await m.query(
      `UPDATE jobs SET status = $5, termination_reason = $2, latest_submission_id = $3, latest_submission_num = $4,
              submission_count = submission_count + 1
        WHERE id = $1`,
      [job.id, prev.terminationReason, id, submissionNum, QUEUED],
    );
    return { id, submissionNum };
  }

  /**
   * Bounds history: the submission before `beforeNum`, if it failed for lack of capacity and never ran, is
   * deleted and counted in the job's folded_submissions instead. Returns whether one was folded.
   */
  async foldSupersededNoCapacity(m: EntityManager, jobId: string, beforeNum: number): Promise<boolean> {
    const rows = await returning(
      m,
      `WITH victim AS (
         SELECT id, termination_reason FROM job_submissions
          WHERE job_id = $1 AND submission_num < $2
          ORDER BY submission_num DESC LIMIT 1
       ), deleted AS (
         DELETE FROM job_submissions s USING victim v
          WHERE s.id = v.id AND v.termination_reason = 'failed_to_start_due_to_no_capacity' AND s.started_at IS NULL
      RETURNING s.termination_reason
       )
       UPDATE jobs SET folded_submissions = jsonb_set(folded_submissions, ARRAY[d.termination_reason],
                         to_jsonb(coalesce((folded_submissions ->> d.termination_reason)::int, 0) + 1))
         FROM deleted d WHERE jobs.id = $1
       RETURNING jobs.id`,
      [jobId, beforeNum],
    );
    return rows.length > 0;
  }

  /**
   * Queued submissions of the given groups become `terminated` without a worker; their jobs follow (returned: now in
   * their final status). Bounded. `keep`: submissions the caller holds to hand out, left as they are.
   *
   * Whether a victim's job is always_run is a scalar subquery, probed by primary key for each row walked: written as
   * EXISTS, PostgreSQL hashed it, reading every job of the database into the hash first (238 ms for 12 victims over
   * 1,000,000 jobs; a claim meeting a cancelled run's queue ended 12 such batches, 1.5 s).
   */
  async terminateQueued(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    status: SubmissionStatus,
    reason: string,
    limit: number,
    spareAlwaysRun: boolean,
    keep: string[],
  ): Promise<{ n: number; retries: number; jobIds: string[] }> {
    const [row] = await m.query(
      `WITH victims AS (
         SELECT id, job_id, submission_num FROM job_submissions q
          WHERE run_id = $1 AND job_group_id = ANY($2::int[]) AND ${QUEUED_PREDICATE}
            AND NOT ($6 AND (SELECT j.always_run FROM jobs j WHERE j.id = q.job_id))
            AND NOT q.id = ANY($7::uuid[])
          LIMIT $5 FOR UPDATE SKIP LOCKED
       ), done AS (
         UPDATE job_submissions s SET status = $3, termination_reason = $4, finished_at = now()
           FROM victims v WHERE s.id = v.id
       RETURNING s.job_id, v.submission_num
       ), jobs_done AS (
         UPDATE jobs j SET status = $3, termination_reason = $4 FROM done d
           WHERE j.id = d.job_id AND j.latest_submission_id IN (SELECT id FROM victims)
       RETURNING j.id
       )
       SELECT (SELECT count(*) FROM done)::int AS n,
              (SELECT count(*) FROM done WHERE submission_num > 0)::int AS retries,
              (SELECT coalesce(array_agg(id), '{}') FROM jobs_done)::text[] AS "jobIds"`,
      [runId, groupIds, status, reason, limit, spareAlwaysRun, keep],
    );
    return row;
  }
}
