import { Check, Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

export const RESOURCE_KINDS = ['project', 'run', 'job_group', 'jobs'] as const;
/** What a creating POST made: `jobs` is a batch added to a group, referenced by its first job_num. */
export type ResourceKind = (typeof RESOURCE_KINDS)[number];

/**
 * A creating POST's key, kept per user: the request's hash and a reference to what it created (not the response,
 * which can be megabytes), so a retried request gets the same object back.
 */
@Entity('idempotency_keys')
@Index('idx_idempotency_keys_created_at', ['createdAt'])
@Check('ck_idempotency_keys_resource_kind', `resource_kind IN ('project', 'run', 'job_group', 'jobs')`)
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

  /** Null only inside the claiming transaction, before the work is done. */
  @Column({ type: 'integer', nullable: true })
  responseStatus!: number | null;

  @Column({ type: 'varchar', length: 16, nullable: true })
  resourceKind!: ResourceKind | null;

  @Column({ type: 'varchar', length: 64, nullable: true })
  resourceId!: string | null;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
