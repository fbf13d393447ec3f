import { Check, Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** One dependency edge: `jobId` waits for `parentId` (both jobs of run `runId`). */
@Entity('job_parents')
@Index('idx_job_parents_parent_id', ['parentId', 'jobId'])
@Check('ck_job_parents_not_self', 'job_id <> parent_id')
export class JobParent {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_parents' })
  @ForeignKey('Job', { name: 'fk_job_parents_job_id', onDelete: 'CASCADE' })
  jobId!: string;

  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_job_parents' })
  @ForeignKey('Job', { name: 'fk_job_parents_parent_id', onDelete: 'CASCADE' })
  parentId!: string;

  @Column({ type: 'uuid' })
  runId!: string;
}
