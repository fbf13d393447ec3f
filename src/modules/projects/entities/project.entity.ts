import { Check, Column, CreateDateColumn, Entity, ForeignKey, PrimaryGeneratedColumn, Unique } from 'typeorm';
import { numericToNumber } from '../../../infra/database/numeric.transformer';

@Entity('projects')
@Unique('uq_projects_name', ['name'])
@Check('ck_projects_billing_limit_usd', 'billing_limit_usd IS NULL OR billing_limit_usd >= 0')
export class Project {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_projects' })
  id!: string;

  @Column({ type: 'varchar', length: 64 })
  name!: string;

  @Column({ type: 'numeric', precision: 18, scale: 6, nullable: true, transformer: numericToNumber })
  billingLimitUsd!: number | null;

  @Column({ type: 'uuid' })
  @ForeignKey('User', { name: 'fk_projects_created_by' })
  createdBy!: string;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
