import { Body, Controller, Get, HttpCode, Param, Post, Query, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import {
  ApiAuthenticated,
  ApiErrors,
  ApiGroupParam,
  ApiIdempotencyKey,
  ApiPageResponse,
  ApiProjectParam,
  ApiUuidParam,
} from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IdempotencyKey } from '../../common/idempotency/idempotency-key.decorator';
import { RawJsonInterceptor } from '../../common/json/raw-json';
import { Page, PageQueryDto } from '../../common/pagination/cursor';
import { IntParamPipe } from '../../common/validation/params';
import {
  CancelJobGroupDto,
  CancellationView,
  CreateJobGroupDto,
  JobGroupView,
  ListGroupJobsQueryDto,
} from './dto/job-group.dto';
import { CostReport } from '../billing/dto/billing.dto';
import { JobList, JobView } from '../jobs/dto/job-spec';
import { AddJobsDto } from './dto/job-group-requests.dto';
import { JobGroupWithCost } from './dto/job-group-with-cost.dto';
import { JobGroupRequestsService } from './job-group-requests.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

const group = new IntParamPipe('g', 'job group id');

@ApiTags('job groups')
@ApiAuthenticated()
@ApiProjectParam()
@ApiUuidParam('runId', 'Run')
@Controller('api/v1/projects/:project/runs/:runId/job-groups')
@Access('user')
@UseInterceptors(ReadRetryInterceptor, RawJsonInterceptor)
export class JobGroupsController {
  constructor(private readonly groups: JobGroupRequestsService) {}

  /** A group under `parent_id` (0 = the run); at most 5 levels below the root; 409 under a cancelled group. */
  @Post()
  @ApiCreatedResponse({ type: JobGroupView })
  @ApiIdempotencyKey()
  @ApiErrors(400, 402, 404, 409, 413)
  create(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Body() body: CreateJobGroupDto,
    @IdempotencyKey() key?: string,
  ): Promise<JobGroupView> {
    return this.groups.create(p, project, runId, body, key);
  }

  /** Up to 10,000 jobs in one transaction. */
  @Post(':g/jobs')
  @ApiGroupParam()
  @ApiCreatedResponse({ type: JobList })
  @ApiIdempotencyKey()
  @ApiErrors(400, 402, 404, 409, 413)
  addJobs(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Body() body: AddJobsDto,
    @IdempotencyKey() key?: string,
  ): Promise<JobList> {
    return this.groups.addJobs(p, project, runId, g, body, key);
  }

  /** Counts include the whole subtree; status precedence failure > cancelled > success > running. */
  @Get(':g')
  @ApiGroupParam()
  @ApiOkResponse({ type: JobGroupWithCost })
  @ApiErrors(400, 404)
  get(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
  ): Promise<JobGroupWithCost> {
    return this.groups.get(p, project, runId, g);
  }

  @Get(':g/job-groups')
  @ApiGroupParam()
  @ApiPageResponse(JobGroupWithCost, 'The direct children of the group.')
  @ApiErrors(400, 404)
  children(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Query() q: PageQueryDto,
  ): Promise<Page<JobGroupWithCost>> {
    return this.groups.children(p, project, runId, g, q.limit, q.cursor);
  }

  /** Jobs of the group (or its subtree with `recursive=true`), by effective status (comma list). */
  @Get(':g/jobs')
  @ApiGroupParam()
  @ApiPageResponse(JobView)
  @ApiErrors(400, 404)
  jobs(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Query() q: ListGroupJobsQueryDto,
  ): Promise<Page<JobView>> {
    return this.groups.listJobs(p, project, runId, g, q);
  }

  /** Idempotent: a repeat, or a cancel under an already cancelled ancestor, returns the cancellation in force. */
  @Post(':g/cancel')
  @HttpCode(200)
  @ApiGroupParam()
  @ApiOkResponse({ type: CancellationView })
  @ApiErrors(400, 404, 413)
  cancel(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Body() body: CancelJobGroupDto,
  ): Promise<CancellationView> {
    return this.groups.cancel(p, project, runId, g, body.reason);
  }

  /** The group's whole subtree's cost, exact at the time of the request (running submissions included). */
  @Get(':g/cost')
  @ApiTags('billing')
  @ApiGroupParam()
  @ApiOkResponse({ type: CostReport })
  @ApiErrors(400, 404)
  cost(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
  ): Promise<CostReport> {
    return this.groups.cost(p, project, runId, g);
  }
}
