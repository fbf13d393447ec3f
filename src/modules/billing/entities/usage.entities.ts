import { Column, Entity, PrimaryColumn } from 'typeorm';

/*
 * Usage aggregates, in unit-seconds of one resource version (exact numeric).
 * Rows with a `token` are shards: sum them.
 */

@Entity('billing_job_usage')
export class BillingJobUsage {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_job_usage' })
  jobId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_billing_job_usage' })
  resourceId!: number;

  @Column({ type: 'uuid' })
  runId!: string;

  @Column({ type: 'numeric' })
  usage!: string;
}

/** Usage of a group's whole subtree: every accrual is added to the group and each of its ancestors. */
@Entity('billing_group_usage')
export class BillingGroupUsage {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_group_usage' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_billing_group_usage' })
  jobGroupId!: number;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_billing_group_usage' })
  resourceId!: number;

  @PrimaryColumn({ type: 'smallint', primaryKeyConstraintName: 'pk_billing_group_usage' })
  token!: number;

  @Column({ type: 'numeric' })
  usage!: string;
}

@Entity('billing_run_usage')
export class BillingRunUsage {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_run_usage' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_billing_run_usage' })
  resourceId!: number;

  @PrimaryColumn({ type: 'smallint', primaryKeyConstraintName: 'pk_billing_run_usage' })
  token!: number;

  @Column({ type: 'numeric' })
  usage!: string;
}

/** Per project × user × UTC day; an accrual spanning midnight is split at midnight. */
@Entity('billing_daily_usage')
export class BillingDailyUsage {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_daily_usage' })
  projectId!: string;

  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_billing_daily_usage' })
  userId!: string;

  @PrimaryColumn({ type: 'date', primaryKeyConstraintName: 'pk_billing_daily_usage' })
  day!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_billing_daily_usage' })
  resourceId!: number;

  @PrimaryColumn({ type: 'smallint', primaryKeyConstraintName: 'pk_billing_daily_usage' })
  token!: number;

  @Column({ type: 'numeric' })
  usage!: string;
}
