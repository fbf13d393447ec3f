import { Check, Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

export type JobGroupState = 'running' | 'complete';
/** A group's status as its view shows it (GROUP_STATUSES in the dto). */
export type StoredGroupStatus = 'running' | 'success' | 'failure' | 'cancelled';

@Entity('job_groups')
@Index('idx_job_groups_run_id_parent_id', ['runId', 'parentId', 'jobGroupId'])
@ForeignKey('JobGroup', ['runId', 'parentId'], ['runId', 'jobGroupId'], { name: 'fk_job_groups_parent' })
@Check('ck_job_groups_depth', 'depth BETWEEN 0 AND 5')
@Check('ck_job_groups_root', '(job_group_id = 0) = (parent_id IS NULL)')
@Check('ck_job_groups_state', `state IN ('running', 'complete')`)
@Check('ck_job_groups_status', `status IN ('running', 'success', 'failure', 'cancelled')`)
@Check('ck_job_groups_cancel_after_n_failures', 'cancel_after_n_failures IS NULL OR cancel_after_n_failures > 0')
export class JobGroup {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_groups' })
  @ForeignKey('Run', { name: 'fk_job_groups_run_id', onDelete: 'CASCADE' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_groups' })
  jobGroupId!: number;

  @Column({ type: 'integer', nullable: true })
  parentId!: number | null;

  @Column({ type: 'integer' })
  depth!: number;

  @Column({ type: 'jsonb', default: {} })
  attributes!: Record<string, unknown>;

  @Column({ type: 'integer', nullable: true })
  cancelAfterNFailures!: number | null;

  /** `complete` once every job of the subtree has finished (or the subtree was cancelled); re-opens on new jobs. */
  @Column({ type: 'varchar', length: 16, default: 'complete' })
  state!: JobGroupState;

  /**
   * The status the group's view showed when it was last settled (RunStatusService): a settle that derives another
   * one records the change (and its `group.status` event) here.
   */
  @Column({ type: 'varchar', length: 16, default: 'success' })
  status!: StoredGroupStatus;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
