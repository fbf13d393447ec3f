import { Check, Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** Recursive job counts of a group's whole subtree, apart from the group row so hot updates never lock it. */
@Entity('job_group_counters')
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], { name: 'fk_job_group_counters_group', onDelete: 'CASCADE' })
@Check('ck_job_group_counters_sum', 'n_completed = n_succeeded + n_failed + n_cancelled AND n_completed <= n_jobs AND n_completed >= 0')
export class JobGroupCounters {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_group_counters' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_group_counters' })
  jobGroupId!: number;

  @Column({ type: 'integer', default: 0 })
  nJobs!: number;

  @Column({ type: 'integer', default: 0 })
  nCompleted!: number;

  @Column({ type: 'integer', default: 0 })
  nSucceeded!: number;

  @Column({ type: 'integer', default: 0 })
  nFailed!: number;

  @Column({ type: 'integer', default: 0 })
  nCancelled!: number;

  /** This group itself is cancelled (the who/when/why is in job_groups_cancelled). */
  @Column({ type: 'boolean', default: false })
  cancelled!: boolean;
}
