import { Check, Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * Recursive job counts of a group's whole subtree, apart from the group row so hot updates never lock it, spread over
 * COUNTER_TOKENS rows (`token`), all present from the group's creation: each transaction adds its deltas to the rows
 * of its own token and readers sum them, so concurrent completions in one run do not queue on one row. A row holds
 * a part of each count (a job may start on one token and end on another): only what every delta keeps per row is
 * checked here; the sums are checked against the jobs by the invariants report.
 */
@Entity('job_group_counters')
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], {
  name: 'fk_job_group_counters_group',
  onDelete: 'CASCADE',
})
@Check('ck_job_group_counters_active', 'job_group_id = 0 OR (n_provisioning = 0 AND n_running = 0 AND n_retrying = 0)')
@Check('ck_job_group_counters_sum', 'n_completed = n_succeeded + n_failed + n_cancelled')
@Check('ck_job_group_counters_aborted', 'n_aborted >= 0 AND n_aborted <= n_cancelled')
@Check('ck_job_group_counters_token', 'token BETWEEN 0 AND 15')
export class JobGroupCounters {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_group_counters' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_group_counters' })
  jobGroupId!: number;

  /** Which of the group's COUNTER_TOKENS rows this is. */
  @PrimaryColumn({ type: 'smallint', default: 0, primaryKeyConstraintName: 'pk_job_group_counters' })
  token!: number;

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

  /** Of nCancelled, the jobs that show as `aborted` (the rest show as `terminated`). */
  @Column({ type: 'integer', default: 0 })
  nAborted!: number;

  /**
   * always_run jobs of the subtree not counted yet: a cancellation (not an abort) leaves them out of what it counts,
   * they are counted when they finish.
   */
  @Column({ type: 'integer', default: 0 })
  nAlwaysRunOpen!: number;

  /** This group itself is cancelled (the who/when/why is in job_groups_cancelled). */
  @Column({ type: 'boolean', default: false })
  cancelled!: boolean;

  /**
   * The run's active counts, kept on group 0 only (group 0 is the run): jobs whose newest submission is being
   * provisioned / running or terminating / a queued retry. What run status derivation needs besides the counts.
   */
  @Column({ type: 'integer', default: 0 })
  nProvisioning!: number;

  @Column({ type: 'integer', default: 0 })
  nRunning!: number;

  @Column({ type: 'integer', default: 0 })
  nRetrying!: number;

  /** The subtree's jobs waiting for their parents (status `pending`), under a cancellation or not. */
  @Column({ type: 'integer', default: 0 })
  nPending!: number;
}
