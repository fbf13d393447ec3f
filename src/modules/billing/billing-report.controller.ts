import { Controller, Get, Param, Query, UseInterceptors } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors, ApiProjectParam } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { ProjectsService } from '../projects/projects.service';
import { UsersService } from '../users/users.service';
import { BillingReport, BillingReportQueryDto, ReportDimension } from './dto/billing.dto';
import { BillingService } from './billing.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

/** A project's usage and cost per day, user and resource. (A run's and a group's cost are served under the run.) */
@ApiTags('billing')
@ApiAuthenticated()
@ApiProjectParam()
@UseInterceptors(ReadRetryInterceptor)
@Controller('api/v1/projects/:project')
@Access('user')
export class BillingReportController {
  constructor(
    private readonly billing: BillingService,
    private readonly projects: ProjectsService,
    private readonly users: UsersService,
  ) {}

  /** Closed usage and cost per UTC day, grouped by any of `user`, `day`, `resource` (dates inclusive). */
  @Get('billing')
  @ApiOkResponse({ type: BillingReport })
  @ApiErrors(400, 404)
  async report(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Query() q: BillingReportQueryDto,
  ): Promise<BillingReport> {
    const access = await this.projects.requireAccess(p, project);
    const by = [...new Set((q.group_by ?? 'day').split(','))] as ReportDimension[];
    const rows = await this.billing.report(access.projectId, q.from, q.to, by);
    const names = await this.users.namesByIds(rows.flatMap((r) => (r.userId ? [r.userId] : [])));
    return { items: rows.map(({ userId, ...r }) => (userId ? { user: names.get(userId) ?? userId, ...r } : r)) };
  }
}
