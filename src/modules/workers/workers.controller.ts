import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors, ApiUuidParam } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { notFound } from '../../common/errors/domain-error';
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
