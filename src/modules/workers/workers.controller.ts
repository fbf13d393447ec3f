import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors, ApiUuidParam } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { domainErrorBody } from '../../common/errors/api-exception.filter';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { apiValidationPipe } from '../../common/validation/validation.pipe';
import { isUUID } from 'class-validator';
import { ReportBatchDto, ReportBatchView, type ReportKind } from './dto/report-batch.dto';
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
import type { Report } from '../lifecycle/lifecycle.types';
import { WorkerReportsService } from '../lifecycle/worker-reports.service';

const submissionId = new ParseUUIDPipe({ exceptionFactory: () => notFound('submission') });

/** Each report of a batch is validated as its single route's body is. */
const BODY_OF: Record<ReportKind, typeof RunningDto | typeof HeartbeatDto | typeof CompleteDto> = {
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
   * Up to 100 `running`, `heartbeat` and `complete` reports of one worker, each judged and answered as its own route
   * would (as idempotent): one bad or stale report never fails the others. A submission's reports take effect in the
   * order sent; reports of different submissions are applied together, in one transaction. A failure of the service
   * itself (the database away) fails the request; what was applied before it stays, and sending the batch again is
   * safe.
   */
  @Post('reports')
  @HttpCode(200)
  @ApiOkResponse({ type: ReportBatchView })
  @ApiErrors(400, 413)
  async reports(@CurrentPrincipal() principal: Principal, @Body() body: ReportBatchDto): Promise<ReportBatchView> {
    const parsed = await Promise.all(body.reports.map((r) => this.parse(r, body.worker_id)));
    const outcomes = await this.lifecycle.batch(principal, body.worker_id, parsed);
    return {
      results: outcomes.map((o, i) => {
        const { submission_id: id, kind } = body.reports[i];
        const echo = {
          submission_id: typeof id === 'string' ? id : null,
          kind: typeof kind === 'string' ? kind : null,
        };
        return o.error
          ? { ...echo, status_code: o.error.status, body: domainErrorBody(o.error) }
          : { ...echo, status_code: 200, body: o.answer };
      }),
    };
  }

  /** One report of a batch, validated as its route's body is; or the error that route would answer with. */
  private async parse(report: Record<string, unknown>, workerId: string): Promise<Report | DomainError> {
    const { submission_id: id, kind, ...fields } = report;
    try {
      if (typeof kind !== 'string' || !(kind in BODY_OF))
        throw invalid('kind', 'must be running, heartbeat or complete');
      if (typeof id !== 'string' || !isUUID(id)) throw notFound('submission');
      if ('worker_id' in fields) throw invalid('worker_id', 'belongs to the batch, not to one of its reports');
      const dto: unknown = await reportPipe.transform(
        { ...fields, worker_id: workerId },
        { type: 'body', metatype: BODY_OF[kind as ReportKind], data: '' },
      );
      return { kind, submissionId: id, body: dto } as Report;
    } catch (err) {
      if (err instanceof DomainError) return err;
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
