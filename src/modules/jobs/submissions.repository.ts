import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { QUEUED_STATUSES } from '../lifecycle/vocabulary';
import { returning } from '../../infra/database/returning';
import type { JobSpec, RequestedResources, SubmissionStatus } from './dto/job-spec';
import { Job } from './entities/job.entity';
import {
  HELD_PREDICATE,
  JobSubmission,
  QUEUED_NO_CONTAINER_PREDICATE,
  QUEUED_PREDICATE,
  RUNNING_PREDICATE,
} from './entities/job-submission.entity';

export interface Capacity {
  cpu: number;
  memoryMib: number;
  gpu: number;
}

export interface Candidate {
  id: string;
  jobId: string;
  runId: string;
  jobGroupId: number;
  submissionNum: number;
  cpu: number;
  memoryMib: number;
  gpu: number;
}

/** What the lifecycle decides on about a submission (and carries into its retry). */
export type SubmissionFacts = Pick<
  JobSubmission,
  | 'id'
  | 'jobId'
  | 'runId'
  | 'jobGroupId'
  | 'submissionNum'
  | 'status'
  | 'terminationReason'
  | 'priority'
  | 'cpu'
  | 'memoryMib'
  | 'gpu'
  | 'needsContainer'
  | 'workerId'
  | 'claimedByUserId'
  | 'leaseExpiresAt'
>;

/** What the lifecycle decides on about a job: which submission is its latest, how many it had, its age. */
export type JobFacts = Pick<
  Job,
  | 'id'
  | 'runId'
  | 'jobGroupId'
  | 'latestSubmissionId'
  | 'latestSubmissionNum'
  | 'submissionCount'
  | 'createdAt'
  | 'alwaysRun'
  | 'hasDependents'
>;

const SUBMISSION_FACTS = `s.id, s.job_id AS "jobId", s.run_id AS "runId", s.job_group_id AS "jobGroupId",
  s.submission_num AS "submissionNum", s.status, s.termination_reason AS "terminationReason", s.priority,
  s.cpu::float8 AS cpu, s.memory_mib AS "memoryMib", s.gpu, s.needs_container AS "needsContainer",
  s.worker_id AS "workerId", s.claimed_by_user_id AS "claimedByUserId", s.lease_expires_at AS "leaseExpiresAt"`;

const JOB_FACTS = `j.latest_submission_id AS "latestSubmissionId", j.latest_submission_num AS "latestSubmissionNum",
  j.submission_count AS "submissionCount", j.created_at AS "jobCreatedAt", j.always_run AS "alwaysRun",
  j.has_dependents AS "hasDependents"`;

/** A row of SUBMISSION_FACTS joined with JOB_FACTS. */
type LockedRow = SubmissionFacts & {
  alwaysRun: boolean;
  hasDependents: boolean;
  latestSubmissionId: string;
  latestSubmissionNum: number;
  submissionCount: number;
  jobCreatedAt: Date;
};

function splitLocked(row: LockedRow): { submission: SubmissionFacts; job: JobFacts } {
  const {
    latestSubmissionId,
    latestSubmissionNum,
    submissionCount,
    jobCreatedAt,
    alwaysRun,
    hasDependents,
    ...submission
  } = row;
  const job = {
    alwaysRun,
    hasDependents,
    id: submission.jobId,
    runId: submission.runId,
    jobGroupId: submission.jobGroupId,
    latestSubmissionId,
    latestSubmissionNum,
    submissionCount,
    createdAt: jobCreatedAt,
  };
  return { submission, job };
}

/** Who holds a submission, where it stands, and the database's clock (to judge grace periods by). */
export type HolderFacts = Pick<
  JobSubmission,
  'id' | 'jobId' | 'runId' | 'submissionNum' | 'status' | 'workerId' | 'claimedByUserId' | 'finishedAt'
> & { now: Date };

export interface ClaimedRow {
  id: string;
  jobId: string;
  runId: string;
  jobGroupId: number;
  submissionNum: number;
  leaseExpiresAt: Date;
  spec: JobSpec;
  jobNum: number;
  replicaNum: number;
  jobName: string;
}

/** The statuses these statements move submissions into, as the state machine names them (SQL parameters). */
const QUEUED: SubmissionStatus = QUEUED_STATUSES[0];
const CLAIMED: SubmissionStatus = 'provisioning';
const STARTED: SubmissionStatus = 'running';

/** Every query of the worker lifecycle on jobs and submissions. */
@Injectable()
export class SubmissionsRepository {
  /**
   * Queued submissions that fit, best first, locked; rows other claimers hold are skipped, never waited for. A
   * claimer without a container runtime never gets a job that asks for an image: it walks the queue index of
   * submissions that need none (the predicate is a constant, so the planner proves the partial index), and so never
   * reads past image jobs waiting for container workers.
   */
  async lockCandidates(m: EntityManager, cap: Capacity, limit: number, containers: boolean): Promise<Candidate[]> {
    const queue = containers ? QUEUED_PREDICATE : QUEUED_NO_CONTAINER_PREDICATE;
    return preparedQuery<Candidate>(
      m,
      containers ? 'lifecycle_lock_candidates' : 'lifecycle_lock_candidates_no_container',
      `SELECT s.id, s.job_id AS "jobId", s.run_id AS "runId", s.job_group_id AS "jobGroupId",
              s.submission_num AS "submissionNum", s.cpu::float8 AS cpu, s.memory_mib AS "memoryMib", s.gpu
         FROM job_submissions s
        WHERE s.${queue} AND s.cpu <= $1 AND s.memory_mib <= $2 AND s.gpu <= $3
        ORDER BY s.priority DESC, s.submitted_at, s.id
        LIMIT $4
          FOR UPDATE SKIP LOCKED`,
      [cap.cpu, cap.memoryMib, cap.gpu, limit],
    );
  }

  /** The lease goes to `workerId` under the service account `userId`: reports must come from both. */
  async markClaimed(
    m: EntityManager,
    ids: string[],
    workerId: string,
    userId: string,
    leaseSeconds: number,
  ): Promise<ClaimedRow[]> {
    if (ids.length === 0) return [];
    return preparedQuery<ClaimedRow>(
      m,
      'lifecycle_mark_claimed',
      `WITH claimed AS (
         UPDATE job_submissions
            SET status = $5, worker_id = $2, claimed_by_user_id = $4, claimed_at = now(),
                lease_expires_at = now() + make_interval(secs => $3)
          WHERE id = ANY($1::uuid[])
      RETURNING id, job_id, run_id, job_group_id, submission_num, lease_expires_at
       ), jobs_updated AS (
         UPDATE jobs j SET status = $5 FROM claimed c WHERE j.id = c.job_id
      RETURNING j.id, j.spec, j.job_num, j.replica_num, j.job_name
       )
       SELECT c.id, c.job_id AS "jobId", c.run_id AS "runId", c.job_group_id AS "jobGroupId",
              c.submission_num AS "submissionNum", c.lease_expires_at AS "leaseExpiresAt", u.spec,
              u.job_num AS "jobNum", u.replica_num AS "replicaNum", u.job_name AS "jobName"
         FROM claimed c JOIN jobs_updated u ON u.id = c.job_id`,
      [ids, workerId, leaseSeconds, userId, CLAIMED],
    );
  }

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

  /** Renews the leases of many submissions (already locked) in one statement; returns each new end. */
  async renewLeases(
    m: EntityManager,
    ids: string[],
    leaseSeconds: number,
  ): Promise<{ id: string; leaseExpiresAt: Date }[]> {
    if (ids.length === 0) return [];
    return preparedQuery<{ id: string; leaseExpiresAt: Date }>(
      m,
      'lifecycle_renew_leases',
      `UPDATE job_submissions SET last_heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => $2)
        WHERE id = ANY($1::uuid[]) RETURNING id, lease_expires_at AS "leaseExpiresAt"`,
      [ids, leaseSeconds],
    );
  }

  /** What the worker measured of a finished attempt (exit status, times, memory), stored as sent. */
  async setRuntimeData(m: EntityManager, id: string, runtimeData: Record<string, unknown>): Promise<void> {
    await m.query(`UPDATE job_submissions SET runtime_data = $2::json WHERE id = $1`, [
      id,
      JSON.stringify(runtimeData),
    ]);
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

  /**
   * Starts the attempt: submission and job `running`, a fresh lease. Returns the lease's end and the job spec's
   * requested resources (what billing pins), read by the same statement.
   */
  async setRunning(
    m: EntityManager,
    id: string,
    jobId: string,
    provisioningData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<{ leaseExpiresAt: Date; resources: RequestedResources }> {
    const [row] = await preparedQuery<{ leaseExpiresAt: Date; resources: RequestedResources }>(
      m,
      'lifecycle_set_running',
      `WITH started AS (
         UPDATE job_submissions SET status = $5, started_at = now(), last_heartbeat_at = now(),
                lease_expires_at = now() + make_interval(secs => $4),
                provisioning_data = coalesce($3::json, provisioning_data),
                deadline_at = now() +
                  make_interval(secs => (SELECT (spec->>'max_duration_s')::float8 FROM jobs WHERE id = $2))
          WHERE id = $1
      RETURNING lease_expires_at
       )
       UPDATE jobs SET status = $5 FROM started WHERE jobs.id = $2
       RETURNING started.lease_expires_at AS "leaseExpiresAt", jobs.spec->'resources' AS resources`,
      [id, jobId, provisioningData === null ? null : JSON.stringify(provisioningData), leaseSeconds, STARTED],
    );
    return row;
  }

  async heartbeat(
    m: EntityManager,
    id: string,
    runtimeData: Record<string, unknown> | null,
    leaseSeconds: number,
  ): Promise<Date> {
    const [row] = await preparedQuery<{ leaseExpiresAt: Date }>(
      m,
      'lifecycle_heartbeat',
      `UPDATE job_submissions SET last_heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => $3),
              runtime_data = coalesce($2::json, runtime_data)
        WHERE id = $1 RETURNING lease_expires_at AS "leaseExpiresAt"`,
      [id, runtimeData === null ? null : JSON.stringify(runtimeData), leaseSeconds],
    );
    return row.leaseExpiresAt;
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
    const id = randomUUID();
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
   * their final status). Bounded.
   */
  async terminateQueued(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    status: SubmissionStatus,
    reason: string,
    limit: number,
    spareAlwaysRun: boolean,
  ): Promise<{ n: number; retries: number; jobIds: string[] }> {
    const [row] = await m.query(
      `WITH victims AS (
         SELECT id, job_id, submission_num FROM job_submissions q
          WHERE run_id = $1 AND job_group_id = ANY($2::int[]) AND ${QUEUED_PREDICATE}
            AND NOT ($6 AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = q.job_id AND j.always_run))
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
      [runId, groupIds, status, reason, limit, spareAlwaysRun],
    );
    return row;
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
