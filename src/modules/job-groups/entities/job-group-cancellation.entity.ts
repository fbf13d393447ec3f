import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** Only groups cancelled directly; descendants see it through the closure table. */
@Entity('job_groups_cancelled')
@Index('idx_job_groups_cancelled_unswept', ['cancelledAt'], { where: 'swept_at IS NULL' })
@ForeignKey('JobGroup', ['runId', 'jobGroupId'], ['runId', 'jobGroupId'], {
  name: 'fk_job_groups_cancelled_group',
  onDelete: 'CASCADE',
})
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

  /** Set once the background sweep has terminated every queued submission below this group. */
  @Column({ type: 'timestamptz', nullable: true })
  sweptAt!: Date | null;
}
