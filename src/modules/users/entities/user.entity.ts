import { Check, Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, Unique } from 'typeorm';
import type { GlobalRole } from '../../../common/auth/principal';

@Entity('users')
@Unique('uq_users_name', ['name'])
@Check('ck_users_global_role', `global_role IN ('admin', 'user', 'service')`)
export class User {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'pk_users' })
  id!: string;

  @Column({ type: 'varchar', length: 64 })
  name!: string;

  @Column({ type: 'varchar', length: 16 })
  globalRole!: GlobalRole;

  @CreateDateColumn({ type: 'timestamptz' })
  createdAt!: Date;
}
