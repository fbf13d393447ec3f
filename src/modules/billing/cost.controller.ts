import { Controller, Get, Param, Query, UseInterceptors } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import {
  ApiAuthenticated,
  ApiErrors,
  ApiGroupParam,
  ApiProjectParam,
  ApiUuidParam,
} from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IntParamPipe } from '../../common/validation/params';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { ProjectsService } from '../projects/projects.service';
import { UsersService } from '../users/users.service';
import { RunsService } from '../runs/runs.service';
import { BillingReport, BillingReportQueryDto, CostReport, ReportDimension } from './dto/billing.dto';
import { BillingService } from './billing.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

const group = new IntParamPipe('g', 'job group id');

/** Cost of a run or of a group's whole subtree, exact at the time of the request (running submissions included). */
@ApiTags('billing')
@ApiAuthenticated()
@ApiProjectParam()
@UseInterceptors(ReadRetryInterceptor)
@Controller('api/v1/projects/:project')
@Access('user')
export class CostController {
  constructor(
    private readonly runs: RunsService,
    private readonly groups: JobGroupsService,
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

  @Get('runs/:runId/cost')
  @ApiUuidParam('runId', 'Run')
  @ApiOkResponse({ type: CostReport })
  @ApiErrors(400, 404)
  async runCost(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
  ): Promise<CostReport> {
    const { run } = await this.runs.requireRun(p, project, runId);
    return this.billing.runCost(run.id);
  }

  @Get('runs/:runId/job-groups/:g/cost')
  @ApiUuidParam('runId', 'Run')
  @ApiGroupParam()
  @ApiOkResponse({ type: CostReport })
  @ApiErrors(400, 404)
  async groupCost(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
  ): Promise<CostReport> {
    const { run } = await this.runs.requireRun(p, project, runId);
    await this.groups.requireGroup(run.id, g);
    return this.billing.groupCost(run.id, g);
  }
}
