import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One entry of the event feed: a status change, a cancellation or a budget stop, written in the transaction of the
 * change it records. Append-only (only retention removes rows). The feed's order is (tx_id, seq), not seq alone:
 * see EventsRepository.read. No foreign keys: ids are references (a run's events outlive nothing they point to, and
 * the insert sits on the workers' hot path).
 */
@Entity('events')
@Index('idx_events_project_id_tx_id_seq', ['projectId', 'txId', 'seq'])
@Index('idx_events_run_id_tx_id_seq', ['runId', 'txId', 'seq'])
export class Event {
  @PrimaryGeneratedColumn('identity', {
    type: 'bigint',
    generatedIdentity: 'ALWAYS',
    primaryKeyConstraintName: 'pk_events',
  })
  seq!: string;

  /**
   * The writing transaction's id, raised to the newest id already ended when the event was written (its snapshot's
   * xmax − 1) when larger: an xid8 (64 bits, never wraps). No default: EventsRepository.insert, the only writer,
   * computes it (and says why).
   * TypeORM learns the type in database.module.ts.
   */
  @Column({ type: 'xid8' as 'bigint' })
  txId!: string;

  /** The writing transaction's start (`now()`), as the change's own timestamps (e.g. `finished_at`). */
  @Column({ type: 'timestamptz', default: () => 'now()' })
  at!: Date;

  @Column({ type: 'varchar', length: 32 })
  type!: string;

  @Column({ type: 'uuid' })
  projectId!: string;

  @Column({ type: 'uuid', nullable: true })
  runId!: string | null;

  @Column({ type: 'integer', nullable: true })
  jobGroupId!: number | null;

  @Column({ type: 'uuid', nullable: true })
  jobId!: string | null;

  @Column({ type: 'integer', nullable: true })
  submissionNum!: number | null;

  @Column({ type: 'varchar', length: 16, nullable: true })
  status!: string | null;

  /** A termination reason, a run's termination reason, or a cancellation's reason (free text up to 256). */
  @Column({ type: 'varchar', length: 256, nullable: true })
  reason!: string | null;

  /** Who did it, where someone did (`by` in the API): a cancelling user's name, or `system`. */
  @Column({ type: 'varchar', length: 64, nullable: true })
  actor!: string | null;
}
