import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { Principal } from '../../common/auth/principal';
import { DomainError, forbidden, notFound } from '../../common/errors/domain-error';
import { IdempotencyService } from '../../common/idempotency/idempotency.service';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import { UsersService } from '../users/users.service';
import { CreateProjectDto, MemberDto, ProjectAccess, ProjectView, UpdateProjectDto } from './dto/project.dto';
import { Project } from './entities/project.entity';
import { PROJECT_ROLE_RANK, ProjectMember, ProjectRole } from './entities/project-member.entity';
import { ProjectsRepository } from './projects.repository';
import { required } from '../../common/required';

@Injectable()
export class ProjectsService {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly projects: ProjectsRepository,
    private readonly users: UsersService,
    private readonly idempotency: IdempotencyService,
  ) {}

  /**
   * The caller's access to a project by name: 404 when it does not exist, 403 when the caller is not a member
   * (or is below `minRole`). Global admins pass every check.
   */
  async requireAccess(
    principal: Principal,
    projectName: string,
    minRole: ProjectRole = 'user',
  ): Promise<ProjectAccess> {
    const found = await this.projects.findByNameWithRole(projectName, principal.userId);
    if (!found) throw notFound(`project ${projectName}`);
    const isAdmin = principal.globalRole === 'admin';
    if (!isAdmin && (!found.role || PROJECT_ROLE_RANK[found.role] < PROJECT_ROLE_RANK[minRole])) {
      throw forbidden(
        found.role
          ? `this needs the ${minRole} role in project ${projectName}`
          : `not a member of project ${projectName}`,
      );
    }
    return {
      projectId: found.project.id,
      projectName: found.project.name,
      role: found.role,
      billingLimitUsd: found.project.billingLimitUsd,
    };
  }

  /** Project ids the caller may read; undefined means all of them (global admin). */
  async visibleProjectIds(principal: Principal): Promise<string[] | undefined> {
    return principal.globalRole === 'admin' ? undefined : this.projects.memberProjectIds(principal.userId);
  }

  /** Projects that have a billing limit: id and limit, a bounded page after `afterId`. */
  async withBillingLimit(
    afterId: string | undefined,
    limit: number,
  ): Promise<{ projectId: string; billingLimitUsd: number }[]> {
    return (await this.projects.withBillingLimit(afterId, limit)).map((p) => ({
      projectId: p.id,
      billingLimitUsd: required(p.billingLimitUsd, `the billing limit of project ${p.id}`),
    }));
  }

  async namesByIds(ids: string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    return new Map((await this.projects.findByIds([...new Set(ids)])).map((p) => [p.id, p.name]));
  }

  async create(principal: Principal, body: CreateProjectDto, idempotencyKey?: string): Promise<ProjectView> {
    return this.dataSource.transaction(async (m) =>
      this.idempotency.once(
        m,
        { userId: principal.userId, key: idempotencyKey, scope: 'POST /projects', request: body, kind: 'project' },
        {
          create: async () => {
            const project = await this.projects.insertProject(
              m,
              body.name,
              body.billing_limit_usd ?? null,
              principal.userId,
            );
            await this.projects.replaceMembers(m, project.id, [{ userId: principal.userId, role: 'admin' }]);
            return toView(project, [{ user: principal.name, role: 'admin' }]);
          },
          idOf: (view) => view.id,
          replay: async (id) => {
            const [view] = await this.views(await this.projects.findByIds([id], m), m);
            if (!view) throw notFound(`project ${id}`);
            return view;
          },
        },
      ),
    );
  }

  async get(principal: Principal, name: string): Promise<ProjectView> {
    const access = await this.requireAccess(principal, name);
    return (await this.views(await this.projects.findByIds([access.projectId])))[0];
  }

  async list(principal: Principal, limit: number, cursor?: string): Promise<Page<ProjectView>> {
    const after = cursor ? (decodeCursor(cursor, ['string'])[0] as string) : undefined;
    const rows = await this.projects.listVisible(principal.userId, principal.globalRole === 'admin', after, limit + 1);
    const page = toPage(
      rows,
      limit,
      (p) => [p.name],
      (p) => p,
    );
    return { items: await this.views(page.items), next_cursor: page.next_cursor };
  }

  async update(principal: Principal, name: string, body: UpdateProjectDto): Promise<ProjectView> {
    const access = await this.requireAccess(principal, name, 'admin');
    // Only fields present change: an omitted field stays as it is, an explicit null clears it.
    if (body.billing_limit_usd !== undefined) {
      const limit = body.billing_limit_usd;
      await this.dataSource.transaction((m) => this.projects.updateBillingLimit(m, access.projectId, limit));
    }
    return this.get(principal, name);
  }

  /** Replaces the member list. It must keep at least one project admin, and every user must exist. */
  async setMembers(principal: Principal, name: string, members: MemberDto[]): Promise<ProjectView> {
    const access = await this.requireAccess(principal, name, 'admin');
    const names = members.map((x) => x.user);
    const duplicate = names.find((n, i) => names.indexOf(n) !== i);
    if (duplicate)
      throw new DomainError('VALIDATION_FAILED', `members lists user ${duplicate} twice`, [
        { field: 'members', message: `duplicate user ${duplicate}` },
      ]);
    if (!members.some((x) => x.role === 'admin')) {
      throw new DomainError('VALIDATION_FAILED', 'members must keep at least one admin', [
        { field: 'members', message: 'needs an admin' },
      ]);
    }
    await this.dataSource.transaction(async (m) => {
      await this.projects.lockProject(m, access.projectId);
      const { found, missing } = await this.users.resolveNames(names, m);
      if (missing.length > 0) {
        throw new DomainError(
          'VALIDATION_FAILED',
          `unknown users: ${missing.join(', ')}`,
          missing.map((u) => ({ field: 'members.user', message: `unknown user ${u}` })),
        );
      }
      await this.projects.replaceMembers(
        m,
        access.projectId,
        members.map((x) => ({ userId: required(found.get(x.user), `the id of user ${x.user}`), role: x.role })),
      );
    });
    return this.get(principal, name);
  }

  private async views(projects: Project[], m?: EntityManager): Promise<ProjectView[]> {
    if (projects.length === 0) return [];
    const members = await this.projects.membersOf(
      projects.map((p) => p.id),
      m,
    );
    const names = await this.users.namesByIds(
      members.map((x) => x.userId),
      m,
    );
    const byProject = new Map<string, ProjectMember[]>();
    for (const x of members) byProject.set(x.projectId, [...(byProject.get(x.projectId) ?? []), x]);
    return projects.map((p) =>
      toView(
        p,
        (byProject.get(p.id) ?? [])
          .map((x) => ({ user: names.get(x.userId) ?? x.userId, role: x.role }))
          .sort((a, b) => a.user.localeCompare(b.user)),
      ),
    );
  }
}

function toView(p: Project, members: ProjectView['members']): ProjectView {
  return {
    id: p.id,
    name: p.name,
    billing_limit_usd: p.billingLimitUsd,
    created_at: p.createdAt.toISOString(),
    members,
  };
}
