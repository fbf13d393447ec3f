import { Check, Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn } from 'typeorm';
import { sqlIn } from '../../lifecycle/sql';
import { RUN_STATUSES, type RunSpec, type RunStatus } from '../dto/run-status';

@Entity('runs')
@Index('uq_runs_project_id_run_name', ['projectId', 'runName'], { unique: true, where: 'NOT deleted' })
@Index('idx_runs_project_id_submitted_at', ['projectId', 'submittedAt', 'id'], { where: 'NOT deleted' })
@Index('idx_runs_submitted_at', ['submittedAt', 'id'], { where: 'NOT deleted' })
@Index('idx_runs_project_id_unfinished', ['projectId'], { where: 'finished_at IS NULL' })
@Index('idx_runs_unfinished', ['id'], { where: 'finished_at IS NULL' })
@Check('ck_runs_status', sqlIn('status', RUN_STATUSES))
export class Run {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_runs' })
  id!: string;

  @Column({ type: 'uuid' })
  @ForeignKey('Project', { name: 'fk_runs_project_id' })
  projectId!: string;

  @Column({ type: 'uuid' })
  @ForeignKey('User', { name: 'fk_runs_user_id' })
  userId!: string;

  @Column({ type: 'varchar', length: 128 })
  runName!: string;

  @Column({ type: 'varchar', length: 16, default: 'submitted' })
  status!: RunStatus;

  @Column({ type: 'varchar', length: 64, nullable: true })
  statusMessage!: string | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  terminationReason!: string | null;

  @Column({ type: 'integer', default: 0 })
  priority!: number;

  @Column({ type: 'jsonb' })
  spec!: RunSpec;

  @Column({ type: 'jsonb', default: {} })
  attributes!: Record<string, unknown>;

  /** Millisecond precision, so a keyset cursor carried as a JS date is exact. */
  @Column({ type: 'timestamptz', precision: 3, default: () => 'now()' })
  submittedAt!: Date;

  @Column({ type: 'timestamptz', nullable: true })
  finishedAt!: Date | null;

  @Column({ type: 'boolean', default: false })
  deleted!: boolean;
}
