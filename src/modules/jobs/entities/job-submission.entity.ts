import { Check, Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { numericToNumber } from '../../../infra/database/numeric.transformer';
import { RUNNING_STATUSES } from '../../lifecycle/outcomes';
import { sqlIn } from '../../lifecycle/sql';
import {
  HELD_STATUSES,
  PENDING_STATUS,
  QUEUED_STATUSES,
  SUBMISSION_STATUSES,
  type SubmissionStatus,
} from '../../lifecycle/vocabulary';

/**
 * Predicates of the partial indexes, as constants (see lifecycle/sql.ts): the lifecycle's statements use these same
 * texts so that the planner can prove them and use the indexes.
 */
export const QUEUED_PREDICATE = sqlIn('status', QUEUED_STATUSES);
export const HELD_PREDICATE = sqlIn('status', HELD_STATUSES);
export const RUNNING_PREDICATE = sqlIn('status', RUNNING_STATUSES);
export const PENDING_PREDICATE = sqlIn('status', [PENDING_STATUS]);
/** The queue as a worker without a container runtime sees it: its own partial index. */
export const QUEUED_NO_CONTAINER_PREDICATE = `${QUEUED_PREDICATE} AND NOT needs_container`;

/** One attempt of a job. */
@Entity('job_submissions')
@Index('uq_job_submissions_job_id_submission_num', ['jobId', 'submissionNum'], { unique: true })
@Index('idx_job_submissions_queue', ['priority', 'submittedAt', 'id'], { where: QUEUED_PREDICATE })
@Index('idx_job_submissions_queue_no_container', ['priority', 'submittedAt', 'id'], {
  where: QUEUED_NO_CONTAINER_PREDICATE,
})
@Index('idx_job_submissions_lease', ['leaseExpiresAt'], { where: HELD_PREDICATE })
@Index('idx_job_submissions_deadline', ['deadlineAt'], { where: `${RUNNING_PREDICATE} AND deadline_at IS NOT NULL` })
@Index('idx_job_submissions_run_id_job_group_id', ['runId', 'jobGroupId'], { where: QUEUED_PREDICATE })
/** Submission 0 of jobs waiting for their parents, by group: the few a fresh cancellation shows as cancelled. */
@Index('idx_job_submissions_pending', ['runId', 'jobGroupId'], { where: PENDING_PREDICATE })
@Check('ck_job_submissions_status', sqlIn('status', SUBMISSION_STATUSES))
export class JobSubmission {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_submissions' })
  id!: string;

  @Column({ type: 'uuid' })
  @ForeignKey('Job', { name: 'fk_job_submissions_job_id', onDelete: 'CASCADE' })
  jobId!: string;

  @Column({ type: 'uuid' })
  runId!: string;

  @Column({ type: 'integer' })
  jobGroupId!: number;

  @Column({ type: 'integer' })
  submissionNum!: number;

  @Column({ type: 'varchar', length: 16 })
  status!: SubmissionStatus;

  @Column({ type: 'varchar', length: 64, nullable: true })
  terminationReason!: string | null;

  @Column({ type: 'integer', nullable: true })
  exitStatus!: number | null;

  @Column({ type: 'integer', default: 0 })
  priority!: number;

  @Column({ type: 'numeric', precision: 10, scale: 3, transformer: numericToNumber })
  cpu!: number;

  @Column({ type: 'integer' })
  memoryMib!: number;

  @Column({ type: 'integer', default: 0 })
  gpu!: number;

  /** The job's spec asks for an `image`: only a worker that declares a container runtime may claim it. */
  @Column({ type: 'boolean', default: false })
  needsContainer!: boolean;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  submittedAt!: Date;

  @Column({ type: 'timestamptz', nullable: true })
  claimedAt!: Date | null;

  @Column({ type: 'timestamptz', nullable: true })
  startedAt!: Date | null;

  @Column({ type: 'timestamptz', nullable: true })
  finishedAt!: Date | null;

  @Column({ type: 'varchar', length: 128, nullable: true })
  workerId!: string | null;

  /**
   * The service account (user id) that claimed the submission: with `workerId`, who holds the lease. No foreign key:
   * users are never deleted, and one would take a KEY SHARE lock on the service account's row in every claim.
   */
  @Column({ type: 'uuid', nullable: true })
  claimedByUserId!: string | null;

  @Column({ type: 'timestamptz', nullable: true })
  leaseExpiresAt!: Date | null;

  /** started_at + the job's max_duration_s, set at `running`: past it the server ends the submission. */
  @Column({ type: 'timestamptz', nullable: true })
  deadlineAt!: Date | null;

  @Column({ type: 'timestamptz', nullable: true })
  lastHeartbeatAt!: Date | null;

  // json, not jsonb: stored and served as sent, never queried into (see StoreSubmissionDataAsJson).
  @Column({ type: 'json', nullable: true })
  provisioningData!: Record<string, unknown> | null;

  @Column({ type: 'json', nullable: true })
  runtimeData!: Record<string, unknown> | null;
}
