import { QUEUED_STATUSES } from '../lifecycle/vocabulary';
import type { SubmissionStatus } from './dto/job-spec';
import type { Job } from './entities/job.entity';
import type { JobSubmission } from './entities/job-submission.entity';

/** Row shapes, SQL column lists and statuses shared by the submission repositories. */

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
export type LockedRow = SubmissionFacts & {
  alwaysRun: boolean;
  hasDependents: boolean;
  latestSubmissionId: string;
  latestSubmissionNum: number;
  submissionCount: number;
  jobCreatedAt: Date;
};

export function splitLocked(row: LockedRow): { submission: SubmissionFacts; job: JobFacts } {
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

/** The statuses these statements move submissions into, as the state machine names them (SQL parameters). */
export const QUEUED: SubmissionStatus = QUEUED_STATUSES[0];
export const CLAIMED: SubmissionStatus = 'provisioning';
export const STARTED: SubmissionStatus = 'running';

export { SUBMISSION_FACTS, JOB_FACTS };
