import { Check, Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** Closure table: one row per (group, ancestor-or-self), written once when the group is created. */
@Entity('job_group_self_and_ancestors')
@Index('idx_job_group_self_and_ancestors_ancestor', ['runId', 'ancestorId', 'jobGroupId'])
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], {
  name: 'fk_job_group_self_and_ancestors_group',
  onDelete: 'CASCADE',
})
@Check('ck_job_group_self_and_ancestors_level', 'level BETWEEN 0 AND 5')
export class JobGroupSelfAndAncestor {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_group_self_and_ancestors' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_group_self_and_ancestors' })
  jobGroupId!: number;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_group_self_and_ancestors' })
  ancestorId!: number;

  /** 0 for the group itself, 1 for its parent, ... */
  @Column({ type: 'integer' })
  level!: number;
}
