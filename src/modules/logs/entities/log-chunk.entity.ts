import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { sqlIn } from '../../lifecycle/sql';
import { LOG_STREAMS } from '../dto/log-streams';

/**
 * A stored piece of one stream of a submission's output: bytes [byte_offset, byte_offset + length) of that stream.
 * Chunks of a stream tile it without overlap (the primary key and the writer's checks); `seq` numbers a
 * submission's chunks of both streams in the order they were written.
 */
@Entity('log_chunks')
@Index('uq_log_chunks_submission_id_seq', ['submissionId', 'seq'], { unique: true })
@Index('idx_log_chunks_run_id', ['runId'])
@Check('ck_log_chunks_stream', sqlIn('stream', LOG_STREAMS))
@Check('ck_log_chunks_length', 'length > 0')
export class LogChunk {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_log_chunks' })
  submissionId!: string;

  @PrimaryColumn({ type: 'varchar', length: 6, primaryKeyConstraintName: 'pk_log_chunks' })
  stream!: string;

  @PrimaryColumn({ type: 'bigint', primaryKeyConstraintName: 'pk_log_chunks' })
  byteOffset!: string;

  @Column({ type: 'integer' })
  seq!: number;

  /** The run, so that a run's logs are found (and deleted) by run. */
  @Column({ type: 'uuid' })
  runId!: string;

  @Column({ type: 'integer' })
  length!: number;

  @Column({ type: 'bytea' })
  data!: Buffer;

  @Column({ type: 'timestamptz', default: () => 'now()' })
  createdAt!: Date;
}
