import { Body, Controller, Get, HttpCode, Param, Post, Query, UseInterceptors } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IdempotencyKey } from '../../common/idempotency/idempotency-key.decorator';
import { RawJsonInterceptor } from '../../common/json/raw-json';
import { Page, PageQueryDto } from '../../common/pagination/cursor';
import { IntParamPipe } from '../../common/validation/params';
import { CancelJobGroupDto, CancellationView, CreateJobGroupDto, JobGroupView, ListGroupJobsQueryDto } from '../job-groups/dto/job-group.dto';
import { JobView } from '../jobs/dto/job-spec';
import { AddJobsDto } from './dto/job-group-requests.dto';
import { JobGroupWithCost, RunJobGroupsService } from './run-job-groups.service';

const group = new IntParamPipe('g', 'job group id');

@ApiTags('job groups')
@ApiBearerAuth()
@Controller('api/v1/projects/:project/runs/:runId/job-groups')
@Access('user')
@UseInterceptors(RawJsonInterceptor)
export class JobGroupsController {
  constructor(private readonly groups: RunJobGroupsService) {}

  /** A group under `parent_id` (0 = the run); at most 5 levels below the root; 409 under a cancelled group. */
  @Post()
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
  addJobs(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Body() body: AddJobsDto,
    @IdempotencyKey() key?: string,
  ): Promise<{ jobs: JobView[] }> {
    return this.groups.addJobs(p, project, runId, g, body, key);
  }

  /** Counts include the whole subtree; status precedence failure > cancelled > success > running. */
  @Get(':g')
  get(@CurrentPrincipal() p: Principal, @Param('project') project: string, @Param('runId') runId: string, @Param('g', group) g: number): Promise<JobGroupWithCost> {
    return this.groups.get(p, project, runId, g);
  }

  @Get(':g/job-groups')
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
  cancel(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('g', group) g: number,
    @Body() body: CancelJobGroupDto,
  ): Promise<CancellationView> {
    return this.groups.cancel(p, project, runId, g, body.reason);
  }
}
