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

/**
 * The tail of a statement ending queued submissions (a `victims` CTE of id, job_id, submission_num before it): each
 * ends with the status and reason in those parameters, and its job follows where it is the latest; returns how many
 * ended, how many of those were retries, and the jobs that followed.
 */
const endVictims = (status: string, reason: string) => `done AS (
         UPDATE job_submissions s SET status = ${status}, termination_reason = ${reason}, finished_at = now()
           FROM victims v WHERE s.id = v.id
       RETURNING s.job_id, v.submission_num
       ), jobs_done AS (
         UPDATE jobs j SET status = ${status}, termination_reason = ${reason} FROM done d
           WHERE j.id = d.job_id AND j.latest_submission_id IN (SELECT id FROM victims)
       RETURNING j.id
       )
       SELECT (SELECT count(*) FROM done)::int AS n,
              (SELECT count(*) FROM done WHERE submission_num > 0)::int AS retries,
              (SELECT coalesce(array_agg(id), '{}') FROM jobs_done)::text[] AS "jobIds"`;

/** A final attempt finished with its job (finishAllWithJobs): rows locked, `runtimeData` stored where given. */
export interface FinishedAttempt {
  id: string;
  jobId: string;
  status: SubmissionStatus;
  reason: string;
  exitStatus: number | null;
  runtimeData: Record<string, unknown> | null;
}

/** A final report the statement locking its submission writes where it stands (lockAndFinish). */
export interface FinishingReport {
  id: string;
  holder: { workerId: string; userId: string };
  status: SubmissionStatus;
  reason: string;
  exitStatus: number | null;
  runtimeData: Record<string, unknown> | null;
  /** The statuses the state machine allows this outcome from. */
  from: readonly SubmissionStatus[];
}

/** How attempts end: finishing submissions and jobs, retries and folded history, terminating queued ones. */
@Injectable()
export class SubmissionsRepository {
  /**
   * Reports' submissions with their jobs, locked in one round trip in submission id order (each submission, then
   * its job); and in the same statement the final reports of `finishing` written where they stand: the
   * submission's holder is the report's `holder` (worker id and account), its status is one of the report's `from` (the
   * statuses the state machine allows that outcome from: never a finished one), and it is its job's latest — then
   * the submission and its job finish, the job counted. Returns every locked row's facts as they were before, and
   * whether it finished it (if not, the caller tells why, from those facts). Unknown ids are left out.
   *
   * `expected`: finishing reports whose follow-ups the caller has queued behind this statement without waiting for
   * its answer (the facts they assume remembered from the submission's start): each must finish here, from the
   * `status` given, on a job without dependents. Should any not, the statement refuses (COMMIT_AHEAD_REFUSED,
   * commit-ahead.ts), aborting the transaction before anything queued behind it applies.
   */
  async lockAndFinish(
    m: EntityManager,
    ids: string[],
    finishing: readonly FinishingReport[],
    expected: readonly { id: string; status: SubmissionStatus }[] = [],
  ): Promise<Map<string, { submission: SubmissionFacts; job: JobFacts; finished: boolean }>> {
    if (ids.length === 0) return new Map();
    const rows = await preparedQuery<LockedRow & { finished: boolean }>(
      m,
      'lifecycle_lock_and_finish',
      `WITH t AS (
         SELECT ${SUBMISSION_FACTS}, ${JOB_FACTS}
           FROM job_submissions s JOIN jobs j ON j.id = s.job_id
          WHERE s.id = ANY($1::uuid[])
          ORDER BY s.id
            FOR UPDATE OF s, j
       ), ok AS (
         SELECT t.id, t."jobId", v.status, v.reason, v.exit_status, v.runtime_data
           FROM t JOIN unnest($2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::text[], $7::int[], $8::text[],
                              $9::text[])
                  AS v(id, worker_id, user_id, status, reason, exit_status, runtime_data, from_statuses) ON v.id = t.id
          WHERE t."workerId" = v.worker_id AND t."claimedByUserId" = v.user_id AND t."latestSubmissionId" = t.id
            AND t.status = ANY(string_to_array(v.from_statuses, ','))
       ), finished AS (
         UPDATE job_submissions s
            SET status = ok.status, termination_reason = ok.reason, exit_status = ok.exit_status,
                finished_at = now(), lease_expires_at = NULL,
                runtime_data = coalesce(ok.runtime_data::json, s.runtime_data)
           FROM ok WHERE s.id = ok.id
      RETURNING s.id
       ), jobs_finished AS (
         UPDATE jobs j SET status = ok.status, termination_reason = ok.reason, completion_counted = true
           FROM ok WHERE j.id = ok."jobId"
       ), verdict AS (
         SELECT CASE WHEN EXISTS (
                  SELECT 1 FROM unnest($10::uuid[], $11::text[]) AS e(id, status) LEFT JOIN t ON t.id = e.id
                   WHERE t.id IS NULL OR t.status::text <> e.status OR t."hasDependents"
                      OR e.id NOT IN (SELECT id FROM finished))
                THEN runplane_refuse_commit_ahead('a report did not end as its queued follow-ups assume') END AS refused
       )
       SELECT t.*, t.id IN (SELECT id FROM finished) AS finished FROM verdict LEFT JOIN t ON true`,
      [
        ids,
        finishing.map((f) => f.id),
        finishing.map((f) => f.holder.workerId),
        finishing.map((f) => f.holder.userId),
        finishing.map((f) => f.status),
        finishing.map((f) => f.reason),
        finishing.map((f) => f.exitStatus),
        finishing.map((f) => (f.runtimeData === null ? null : JSON.stringify(f.runtimeData))),
        finishing.map((f) => f.from.join(',')),
        expected.map((e) => e.id),
        expected.map((e) => e.status),
      ],
    );
    // Driven from the verdict's one row: nothing locked comes back as one row of nulls.
    return new Map(
      rows.filter((r) => r.id !== null).map(({ finished, ...row }) => [row.id, { ...splitLocked(row), finished }]),
    );
  }

  /**
   * Final attempts, set-based: each submission finished (and its `runtime_data` stored where given) and its job's
   * facts following it, the job counted (`completion_counted`: see markUncounted for the rare job a cancellation
   * counted instead). Rows already locked. One statement.
   */
  async finishAllWithJobs(m: EntityManager, items: readonly FinishedAttempt[]): Promise<void> {
    if (items.length === 0) return;
    await preparedQuery(
      m,
      'lifecycle_finish_all_with_jobs',
      `WITH v AS (
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int[], $6::text[])
           AS v(id, job_id, status, reason, exit_status, runtime_data)
       ), finished AS (
         UPDATE job_submissions s
            SET status = v.status, termination_reason = v.reason, exit_status = v.exit_status, finished_at = now(),
                lease_expires_at = NULL, runtime_data = coalesce(v.runtime_data::json, s.runtime_data)
           FROM v WHERE s.id = v.id
       )
       UPDATE jobs j SET status = v.status, termination_reason = v.reason, completion_counted = true
         FROM v WHERE j.id = v.job_id`,
      [
        items.map((i) => i.id),
        items.map((i) => i.jobId),
        items.map((i) => i.status),
        items.map((i) => i.reason),
        items.map((i) => i.exitStatus),
        items.map((i) => (i.runtimeData === null ? null : JSON.stringify(i.runtimeData))),
      ],
    );
  }

  /** Jobs a cancellation counted before their own outcome arrived: not counted by that outcome after all. */
  async markUncounted(m: EntityManager, jobIds: string[]): Promise<void> {
    if (jobIds.length === 0) return;
    await m.query(`UPDATE jobs SET completion_counted = false WHERE id = ANY($1::uuid[])`, [jobIds]);
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
       ), ${endVictims('$3', '$4')}`,
      [runId, groupIds, status, reason, limit, spareAlwaysRun, keep],
    );
    return row;
  }

  /**
   * The given queued submissions (locked by the caller: a claim's candidates below a cancellation) become
   * `terminated` or `aborted` without a worker; their jobs follow where the submission is their latest (returned).
   * Those no longer queued are left as they are.
   */
  async terminateQueuedIds(
    m: EntityManager,
    ids: string[],
    status: SubmissionStatus,
    reason: string,
  ): Promise<{ n: number; retries: number; jobIds: string[] }> {
    const [row] = await m.query(
      `WITH victims AS (
         SELECT id, job_id, submission_num FROM job_submissions q WHERE q.id = ANY($1::uuid[]) AND ${QUEUED_PREDICATE}
       ), ${endVictims('$2', '$3')}`,
      [ids, status, reason],
    );
    return row;
  }
}
