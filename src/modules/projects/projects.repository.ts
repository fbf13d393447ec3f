import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Project } from './entities/project.entity';
import { ProjectMember, ProjectRole } from './entities/project-member.entity';

export interface ProjectWithRole {
  project: Project;
  role: ProjectRole | null;
}

@Injectable()
export class ProjectsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findByNameWithRole(name: string, userId: string): Promise<ProjectWithRole | null> {
    const row = await this.dataSource
      .getRepository(Project)
      .createQueryBuilder('p')
      .leftJoin(ProjectMember, 'm', 'm.project_id = p.id AND m.user_id = :userId', { userId })
      .addSelect('m.role', 'member_role')
      .where('p.name = :name', { name })
      .getRawAndEntities();
    if (row.entities.length === 0) return null;
    return { project: row.entities[0], role: (row.raw[0].member_role as ProjectRole | null) ?? null };
  }

  /** Projects visible to a user (all of them for `everything`), by name, after the cursor. */
  async listVisible(userId: string, everything: boolean, after: string | undefined, limit: number): Promise<Project[]> {
    const qb = this.dataSource.getRepository(Project).createQueryBuilder('p');
    if (!everything) qb.innerJoin(ProjectMember, 'm', 'm.project_id = p.id AND m.user_id = :userId', { userId });
    if (after !== undefined) qb.andWhere('p.name > :after', { after });
    return qb.orderBy('p.name', 'ASC').limit(limit).getMany();
  }

  /** Ids of the projects a user is a member of. */
  async memberProjectIds(userId: string): Promise<string[]> {
    const rows = await this.dataSource
      .getRepository(ProjectMember)
      .find({ select: { projectId: true }, where: { userId } });
    return rows.map((r) => r.projectId);
  }

  membersOf(projectIds: string[], m: EntityManager = this.dataSource.manager): Promise<ProjectMember[]> {
    return m
      .getRepository(ProjectMember)
      .createQueryBuilder('m')
      .where('m.project_id = ANY(:projectIds)', { projectIds })
      .getMany();
  }

  async insertProject(
    m: EntityManager,
    name: string,
    billingLimitUsd: number | null,
    createdBy: string,
  ): Promise<Project> {
    const repo = m.getRepository(Project);
    return repo.save(repo.create({ name, billingLimitUsd, createdBy }));
  }

  async updateBillingLimit(m: EntityManager, projectId: string, billingLimitUsd: number | null): Promise<void> {
    await m.getRepository(Project).update({ id: projectId }, { billingLimitUsd });
  }

  async lockProject(m: EntityManager, projectId: string): Promise<void> {
    await m
      .getRepository(Project)
      .createQueryBuilder('p')
      .setLock('pessimistic_write')
      .where('p.id = :projectId', { projectId })
      .getOne();
  }

  async replaceMembers(
    m: EntityManager,
    projectId: string,
    members: { userId: string; role: ProjectRole }[],
  ): Promise<void> {
    await m.getRepository(ProjectMember).delete({ projectId });
    if (members.length > 0) await m.getRepository(ProjectMember).insert(members.map((x) => ({ projectId, ...x })));
  }

  findByIds(ids: string[], m: EntityManager = this.dataSource.manager): Promise<Project[]> {
    return m.getRepository(Project).createQueryBuilder('p').where('p.id = ANY(:ids)', { ids }).getMany();
  }

  /** Projects with a billing limit, by id after `afterId` (budget enforcement walks them in bounded passes). */
  withBillingLimit(afterId: string | undefined, limit: number): Promise<Project[]> {
    const qb = this.dataSource.getRepository(Project).createQueryBuilder('p').where('p.billing_limit_usd IS NOT NULL');
    if (afterId) qb.andWhere('p.id > :afterId', { afterId });
    return qb.orderBy('p.id').limit(limit).getMany();
  }
}
