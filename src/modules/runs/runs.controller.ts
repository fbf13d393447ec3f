import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import {
  ApiAuthenticated,
  ApiErrors,
  ApiIdempotencyKey,
  ApiPageResponse,
  ApiProjectParam,
  ApiUuidParam,
} from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IdempotencyKey } from '../../common/idempotency/idempotency-key.decorator';
import { RawJsonInterceptor } from '../../common/json/raw-json';
import { Page, PageQueryDto } from '../../common/pagination/cursor';
import { JobView, SubmissionView } from '../jobs/dto/job-spec';
import { CostReport } from '../billing/dto/billing.dto';
import { RunGetQueryDto, RunListQueryDto, RunView } from './dto/run-view.dto';
import { StopRunDto, SubmitRunDto } from './dto/submit-run.dto';
import { RunCommandsService } from './run-commands.service';
import { RunViewsService } from './run-views.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

@ApiTags('runs')
@ApiAuthenticated()
@Controller('api/v1')
@Access('user')
@UseInterceptors(ReadRetryInterceptor, RawJsonInterceptor)
export class RunsController {
  constructor(
    private readonly commands: RunCommandsService,
    private readonly views: RunViewsService,
  ) {}

  /** Runs of every project the caller may see (admins: all), newest first unless `ascending=true`. */
  @Get('runs')
  @ApiPageResponse(RunView)
  @ApiErrors(400)
  listAll(@CurrentPrincipal() p: Principal, @Query() q: RunListQueryDto): Promise<Page<RunView>> {
    return this.views.list(p, undefined, q);
  }

  @Post('projects/:project/runs')
  @ApiProjectParam()
  @ApiCreatedResponse({ type: RunView })
  @ApiIdempotencyKey()
  @ApiErrors(400, 402, 404, 409, 413)
  submit(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Body() body: SubmitRunDto,
    @IdempotencyKey() key?: string,
  ): Promise<RunView> {
    return this.commands.submit(p, project, body, key);
  }

  @Get('projects/:project/runs')
  @ApiProjectParam()
  @ApiPageResponse(RunView)
  @ApiErrors(400, 404)
  list(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Query() q: RunListQueryDto,
  ): Promise<Page<RunView>> {
    return this.views.list(p, project, q);
  }

  /**
   * One run with its first `jobs_limit` jobs; `job_submissions_limit` omitted = every submission (up to 1,000) of each.
   */
  @Get('projects/:project/runs/:runId')
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiOkResponse({ type: RunView })
  @ApiErrors(400, 404)
  get(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Query() q: RunGetQueryDto,
  ): Promise<RunView> {
    return this.views.get(p, project, runId, q);
  }

  @Post('projects/:project/runs/:runId/stop')
  @HttpCode(200)
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiOkResponse({ type: RunView })
  @ApiErrors(400, 404, 413)
  stop(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Body() body: StopRunDto,
  ): Promise<RunView> {
    return this.commands.stop(p, project, runId, body.abort ?? false);
  }

  /** Only finished runs (else 409 RUN_NOT_FINISHED); soft delete. */
  @Delete('projects/:project/runs/:runId')
  @HttpCode(204)
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiNoContentResponse({ description: 'Deleted.' })
  @ApiErrors(400, 404, 409)
  delete(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
  ): Promise<void> {
    return this.commands.delete(p, project, runId);
  }

  /** A job's whole history, newest first, paginated. */
  @Get('projects/:project/runs/:runId/jobs/:jobId/submissions')
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiUuidParam('jobId', 'Job')
  @ApiPageResponse(SubmissionView, 'Newest first.')
  @ApiErrors(400, 404)
  submissions(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('jobId') jobId: string,
    @Query() q: PageQueryDto,
  ): Promise<Page<SubmissionView>> {
    return this.views.history(p, project, runId, jobId, q.limit, q.cursor);
  }

  /** Jobs that depend on a job (its children), paginated by job id. */
  @Get('projects/:project/runs/:runId/jobs/:jobId/dependents')
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiUuidParam('jobId', 'Job')
  @ApiPageResponse(JobView, 'Children of the job (jobs whose depends_on names it), by job id.')
  @ApiErrors(400, 404)
  dependents(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('jobId') jobId: string,
    @Query() q: PageQueryDto,
  ): Promise<Page<JobView>> {
    return this.views.dependents(p, project, runId, jobId, q.limit, q.cursor);
  }

  /** The run's cost, exact at the time of the request (running submissions included). */
  @Get('projects/:project/runs/:runId/cost')
  @ApiTags('billing')
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiOkResponse({ type: CostReport })
  @ApiErrors(400, 404)
  cost(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
  ): Promise<CostReport> {
    return this.views.cost(p, project, runId);
  }
}
