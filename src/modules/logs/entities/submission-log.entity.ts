import { Column, Entity, Index, PrimaryColumn } from 'typeorm';

/**
 * One submission's log as a whole: how many bytes of each stream are stored (the next chunk's offset), how many
 * chunks (the next one's `seq`). Its row is locked by every write to the submission's log, which serialises them:
 * `seq` is then the order in which writes committed, which is what readers page and follow by.
 */
@Entity('submission_logs')
@Index('idx_submission_logs_run_id', ['runId'])
export class SubmissionLog {
  /** The submission (of the jobs module; an id, no foreign key). */
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_submission_logs' })
  submissionId!: string;

  @Column({ type: 'uuid' })
  runId!: string;

  @Column({ type: 'bigint', default: 0 })
  stdoutBytes!: string;

  @Column({ type: 'bigint', default: 0 })
  stderrBytes!: string;

  @Column({ type: 'integer', default: 0 })
  nChunks!: number;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  updatedAt!: Date;
}
