import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** Only groups cancelled directly; descendants see it through the closure table. */
@Entity('job_groups_cancelled')
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], { name: 'fk_job_groups_cancelled_group', onDelete: 'CASCADE' })
export class JobGroupCancellation {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_groups_cancelled' })
  runId!: string;

  @PrimaryColumn({ type: 'integer', primaryKeyConstraintName: 'pk_job_groups_cancelled' })
  jobGroupId!: number;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  cancelledAt!: Date;

  /** User name, or `system` for fail-fast and budget cancellations. */
  @Column({ type: 'varchar', length: 64 })
  cancelledBy!: string;

  @Column({ type: 'varchar', length: 256 })
  reason!: string;
}
