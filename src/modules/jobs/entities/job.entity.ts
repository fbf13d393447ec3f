import { Check, Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import { sqlIn } from '../../lifecycle/sql';
import { SUBMISSION_STATUSES } from '../../lifecycle/vocabulary';
import type { JobSpec, SubmissionStatus } from '../dto/job-spec';

/** One logical job, with its newest submission's facts copied in so lists never read history for status. */
@Entity('jobs')
@Index('uq_jobs_run_id_job_num_replica_num', ['runId', 'jobNum', 'replicaNum'], { unique: true })
@Index('idx_jobs_run_id_job_group_id', ['runId', 'jobGroupId', 'jobNum', 'replicaNum'])
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], { name: 'fk_jobs_group' })
@Check('ck_jobs_status', sqlIn('status', SUBMISSION_STATUSES))
@Check('ck_jobs_n_pending_parents', 'n_pending_parents >= 0')
export class Job {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_jobs' })
  id!: string;

  @Column({ type: 'uuid' })
  @ForeignKey('Run', { name: 'fk_jobs_run_id', onDelete: 'CASCADE' })
  runId!: string;

  @Column({ type: 'integer' })
  jobGroupId!: number;

  @Column({ type: 'integer' })
  jobNum!: number;

  @Column({ type: 'integer' })
  replicaNum!: number;

  @Column({ type: 'varchar', length: 128 })
  jobName!: string;

  @Column({ type: 'jsonb' })
  spec!: JobSpec;

  @Column({ type: 'boolean', default: false })
  alwaysRun!: boolean;

  @Column({ type: 'varchar', length: 16 })
  status!: SubmissionStatus;

  @Column({ type: 'varchar', length: 64, nullable: true })
  terminationReason!: string | null;

  @Column({ type: 'uuid' })
  latestSubmissionId!: string;

  @Column({ type: 'integer' })
  latestSubmissionNum!: number;

  /** Every submission ever made, including those folded away. */
  @Column({ type: 'integer' })
  submissionCount!: number;

  /** Deleted superseded submissions, counted by termination reason. */
  @Column({ type: 'jsonb', default: {} })
  foldedSubmissions!: Record<string, number>;

  /** Whether the job's final outcome is in its groups' counters (false while active or when a cancel counted it). */
  @Column({ type: 'boolean', default: false })
  completionCounted!: boolean;

  /** Parents (job_parents rows of this job). */
  @Column({ type: 'integer', default: 0 })
  nParents!: number;

  /** Parents (job_parents) not finished yet; the job is `pending` while above 0. */
  @Column({ type: 'integer', default: 0 })
  nPendingParents!: number;

  /** Some job depends on this one: its final outcome releases or ends children. */
  @Column({ type: 'boolean', default: false })
  hasDependents!: boolean;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
