import { Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** The first response to a creating POST, kept per user and key so a retried request gets it back. */
@Entity('idempotency_keys')
@Index('idx_idempotency_keys_created_at', ['createdAt'])
export class IdempotencyKeyRecord {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_idempotency_keys' })
  @ForeignKey('User', { name: 'fk_idempotency_keys_user_id', onDelete: 'CASCADE' })
  userId!: string;

  @PrimaryColumn({ type: 'varchar', length: 255, primaryKeyConstraintName: 'pk_idempotency_keys' })
  key!: string;

  @Column({ type: 'varchar', length: 255 })
  scope!: string;

  @Column({ type: 'char', length: 64 })
  requestHash!: string;

  @Column({ type: 'integer', nullable: true })
  responseStatus!: number | null;

  @Column({ type: 'jsonb', nullable: true })
  responseBody!: unknown;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
