import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { notFound } from '../../common/errors/domain-error';
import { ClaimDto, ClaimedSubmissionView, CompleteDto, CompleteView, HeartbeatDto, RunningDto } from './dto/worker.dto';
import { WorkerLifecycleService } from './worker-lifecycle.service';

const submissionId = new ParseUUIDPipe({ exceptionFactory: () => notFound('submission') });

/** The internal API workers call; service-account tokens only. */
@ApiTags('internal (workers)')
@ApiBearerAuth()
@Controller('internal/v1/submissions')
@Access('service')
export class WorkersController {
  constructor(private readonly lifecycle: WorkerLifecycleService) {}

  /** Moves fitting queued submissions to `provisioning` with a lease; concurrent claimers never share one. */
  @Post('claim')
  @HttpCode(200)
  claim(@CurrentPrincipal() principal: Principal, @Body() body: ClaimDto): Promise<{ submissions: ClaimedSubmissionView[] }> {
    return this.lifecycle.claim(principal, body);
  }

  /** Reports (running, heartbeat, complete) are accepted only from the account and worker id that claimed. */
  @Post(':id/running')
  @HttpCode(200)
  running(@CurrentPrincipal() principal: Principal, @Param('id', submissionId) id: string, @Body() body: RunningDto) {
    return this.lifecycle.running(principal, id, body);
  }

  /** Renews the lease; `cancel_requested` once the submission's group, an ancestor, or the run is cancelled. */
  @Post(':id/heartbeat')
  @HttpCode(200)
  heartbeat(@CurrentPrincipal() principal: Principal, @Param('id', submissionId) id: string, @Body() body: HeartbeatDto) {
    return this.lifecycle.heartbeat(principal, id, body);
  }

  /**
   * Idempotent; a stale submission (not the job's latest, or another worker's) is a 409, another account's a 404;
   * a (status, reason) pair the state machine forbids is a 400, an outcome not allowed from the submission's status
   * (e.g. `done` before `running`) a 409 `TRANSITION_NOT_ALLOWED`.
   */
  @Post(':id/complete')
  @HttpCode(200)
  complete(@CurrentPrincipal() principal: Principal, @Param('id', submissionId) id: string, @Body() body: CompleteDto): Promise<CompleteView> {
    return this.lifecycle.complete(principal, id, body);
  }
}
