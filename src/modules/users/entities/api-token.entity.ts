import { Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryGeneratedColumn, Unique } from 'typeorm';

/** A bearer token, stored as the SHA-256 of its text: tokens are 256-bit random, so a slow hash buys nothing. */
@Entity('api_tokens')
@Unique('uq_api_tokens_token_hash', ['tokenHash'])
@Index('idx_api_tokens_user_id', ['userId'])
export class ApiToken {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_api_tokens' })
  id!: string;

  @Column({ type: 'uuid' })
  @ForeignKey('User', { name: 'fk_api_tokens_user_id', onDelete: 'CASCADE' })
  userId!: string;

  @Column({ type: 'char', length: 64 })
  tokenHash!: string;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
