import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors, ApiUuidParam } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { domainErrorBody } from '../../common/errors/api-exception.filter';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { apiValidationPipe } from '../../common/validation/validation.pipe';
import { isUUID } from 'class-validator';
import { ReportBatchDto, ReportBatchView, type ReportResultView, type ReportType } from './dto/report-batch.dto';
import {
  ClaimDto,
  ClaimView,
  CompleteDto,
  CompleteView,
  HeartbeatDto,
  HeartbeatView,
  RunningDto,
  RunningView,
} from './dto/worker.dto';
import { ClaimsService } from '../lifecycle/claims.service';
import { WorkerReportsService } from '../lifecycle/worker-reports.service';

const submissionId = new ParseUUIDPipe({ exceptionFactory: () => notFound('submission') });

/** Each report of a batch is validated as its single route's body is. */
const BODY_OF: Record<ReportType, typeof RunningDto | typeof HeartbeatDto | typeof CompleteDto> = {
  running: RunningDto,
  heartbeat: HeartbeatDto,
  complete: CompleteDto,
};
const reportPipe = apiValidationPipe();
const invalid = (field: string, message: string) =>
  new DomainError('VALIDATION_FAILED', `${field} ${message}`, [{ field, message }]);

/** The internal API workers call; service-account tokens only. */
@ApiTags('internal (workers)')
@ApiAuthenticated()
@Controller('internal/v1/submissions')
@Access('service')
export class WorkersController {
  constructor(
    private readonly claims: ClaimsService,
    private readonly lifecycle: WorkerReportsService,
  ) {}

  /** Moves fitting queued submissions to `provisioning` with a lease; concurrent claimers never share one. */
  @Post('claim')
  @HttpCode(200)
  @ApiOkResponse({ type: ClaimView })
  @ApiErrors(400, 413)
  claim(@CurrentPrincipal() principal: Principal, @Body() body: ClaimDto): Promise<ClaimView> {
    return this.claims.claim(principal, body);
  }

  /**
   * Up to 100 `running`, `heartbeat` and `complete` reports of one worker, applied in order, each as its own route
   * would (its own transaction, as idempotent): one bad or stale report never fails the others, and each gets the
   * answer or the error its route would have given. A failure of the service itself (the database away) fails the
   * request; the reports before it stay applied, and sending the batch again is safe.
   */
  @Post('reports')
  @HttpCode(200)
  @ApiOkResponse({ type: ReportBatchView })
  @ApiErrors(400, 413)
  async reports(@CurrentPrincipal() principal: Principal, @Body() body: ReportBatchDto): Promise<ReportBatchView> {
    const results: ReportResultView[] = [];
    for (const report of body.reports) results.push(await this.report(principal, body.worker_id, report));
    return { results };
  }

  private async report(
    principal: Principal,
    workerId: string,
    report: Record<string, unknown>,
  ): Promise<ReportResultView> {
    const { submission_id: id, type, ...fields } = report;
    const result = { submission_id: typeof id === 'string' ? id : null, type: typeof type === 'string' ? type : null };
    try {
      if (typeof type !== 'string' || !(type in BODY_OF))
        throw invalid('type', 'must be running, heartbeat or complete');
      if (typeof id !== 'string' || !isUUID(id)) throw notFound('submission');
      if ('worker_id' in fields) throw invalid('worker_id', 'belongs to the batch, not to one of its reports');
      const dto: unknown = await reportPipe.transform(
        { ...fields, worker_id: workerId },
        { type: 'body', metatype: BODY_OF[type as ReportType], data: '' },
      );
      const answer =
        type === 'running'
          ? await this.lifecycle.running(principal, id, dto as RunningDto)
          : type === 'heartbeat'
            ? await this.lifecycle.heartbeat(principal, id, dto as HeartbeatDto)
            : await this.lifecycle.complete(principal, id, dto as CompleteDto);
      return { ...result, status: 200, body: answer };
    } catch (err) {
      if (err instanceof DomainError) return { ...result, status: err.status, error: domainErrorBody(err) };
      throw err;
    }
  }

  /** Reports (running, heartbeat, complete) are accepted only from the account and worker id that claimed. */
  @Post(':id/running')
  @HttpCode(200)
  @ApiUuidParam('id', 'Submission')
  @ApiOkResponse({ type: RunningView })
  @ApiErrors(400, 404, 409, 413)
  running(
    @CurrentPrincipal() principal: Principal,
    @Param('id', submissionId) id: string,
    @Body() body: RunningDto,
  ): Promise<RunningView> {
    return this.lifecycle.running(principal, id, body);
  }

  /** Renews the lease; `cancel_requested` once the submission's group, an ancestor, or the run is cancelled. */
  @Post(':id/heartbeat')
  @HttpCode(200)
  @ApiUuidParam('id', 'Submission')
  @ApiOkResponse({ type: HeartbeatView })
  @ApiErrors(400, 404, 409, 413)
  heartbeat(
    @CurrentPrincipal() principal: Principal,
    @Param('id', submissionId) id: string,
    @Body() body: HeartbeatDto,
  ): Promise<HeartbeatView> {
    return this.lifecycle.heartbeat(principal, id, body);
  }

  /**
   * Idempotent; a stale submission (not the job's latest, or another worker's) is a 409, another account's a 404;
   * a (status, reason) pair the state machine forbids is a 400, an outcome not allowed from the submission's status
   * (e.g. `done` before `running`) a 409 `TRANSITION_NOT_ALLOWED`.
   */
  @Post(':id/complete')
  @HttpCode(200)
  @ApiUuidParam('id', 'Submission')
  @ApiOkResponse({ type: CompleteView })
  @ApiErrors(400, 404, 409, 413)
  complete(
    @CurrentPrincipal() principal: Principal,
    @Param('id', submissionId) id: string,
    @Body() body: CompleteDto,
  ): Promise<CompleteView> {
    return this.lifecycle.complete(principal, id, body);
  }
}
