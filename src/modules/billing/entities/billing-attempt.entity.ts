import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * A submission that started running, as billing sees it: who pays (run, job, project, user, the group chain it
 * bills) and how far its usage has been rolled up. `rolled_up_to` only ever moves forward; `closed_at` ends it.
 */
@Entity('billing_attempts')
@Index('idx_billing_attempts_run_id_open', ['runId'], { where: 'closed_at IS NULL' })
@Index('idx_billing_attempts_project_id_open', ['projectId'], { where: 'closed_at IS NULL' })
@Check('ck_billing_attempts_rolled_up_to', 'rolled_up_to >= started_at')
export class BillingAttempt {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_attempts' })
  submissionId!: string;

  @Column({ type: 'uuid' })
  runId!: string;

  @Column({ type: 'uuid' })
  jobId!: string;

  @Column({ type: 'uuid' })
  projectId!: string;

  @Column({ type: 'uuid' })
  userId!: string;

  /** The submission's group and all its ancestors (0 included). */
  @Column({ type: 'integer', array: true })
  jobGroupIds!: number[];

  @Column({ type: 'timestamptz' })
  startedAt!: Date;

  @Column({ type: 'timestamptz' })
  rolledUpTo!: Date;

  @Column({ type: 'timestamptz', nullable: true })
  closedAt!: Date | null;
}
