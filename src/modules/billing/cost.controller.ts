import { Controller, Get, Param } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IntParamPipe } from '../../common/validation/params';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { RunsService } from '../runs/runs.service';
import { CostReport } from './dto/billing.dto';
import { BillingService } from './billing.service';

const group = new IntParamPipe('job group id');

/** Cost of a run or of a group's whole subtree, exact at the time of the request (running submissions included). */
@ApiTags('billing')
@ApiBearerAuth()
@Controller('api/v1/projects/:project/runs/:runId')
@Access('user')
export class CostController {
  constructor(
    private readonly runs: RunsService,
    private readonly groups: JobGroupsService,
    private readonly billing: BillingService,
  ) {}

  @Get('cost')
  async runCost(@CurrentPrincipal() p: Principal, @Param('project') project: string, @Param('runId') runId: string): Promise<CostReport> {
    const { run } = await this.runs.requireRun(p, project, runId);
    return this.billing.runCost(run.id);
  }

  @Get('job-groups/:g/cost')
  async groupCost(@CurrentPrincipal() p: Principal, @Param('project') project: string, @Param('runId') runId: string, @Param('g', group) g: number): Promise<CostReport> {
    const { run } = await this.runs.requireRun(p, project, runId);
    await this.groups.requireGroup(run.id, g);
    return this.billing.groupCost(run.id, g);
  }
}
