import { Check, Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

export type ProjectRole = 'admin' | 'manager' | 'user';
export const PROJECT_ROLES: ProjectRole[] = ['admin', 'manager', 'user'];
export const PROJECT_ROLE_RANK: Record<ProjectRole, number> = { user: 1, manager: 2, admin: 3 };

@Entity('project_members')
@Index('idx_project_members_user_id', ['userId'])
@Check('ck_project_members_role', `role IN ('admin', 'manager', 'user')`)
export class ProjectMember {
  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_project_members' })
  @ForeignKey('Project', { name: 'fk_project_members_project_id', onDelete: 'CASCADE' })
  projectId!: string;

  @PrimaryColumn({ type: 'uuid', primaryKeyConstraintName: 'pk_project_members' })
  @ForeignKey('User', { name: 'fk_project_members_user_id', onDelete: 'CASCADE' })
  userId!: string;

  @Column({ type: 'varchar', length: 16 })
  role!: ProjectRole;
}
