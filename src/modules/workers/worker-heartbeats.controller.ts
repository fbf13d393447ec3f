import { Body, Controller, HttpCode, Param, PipeTransform, Post } from '@nestjs/common';
import { ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import { ApiAuthenticated, ApiErrors } from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { DomainError } from '../../common/errors/domain-error';
import { HeartbeatBatchDto, HeartbeatBatchView, WORKER_ID, WORKER_ID_RULE } from './dto/worker.dto';
import { HeartbeatsService } from '../lifecycle/heartbeats.service';

/** The worker id in the path, checked as the body's `worker_id` is elsewhere: a 400 naming it. */
class WorkerIdPipe implements PipeTransform<unknown, string> {
  transform(value: unknown): string {
    if (typeof value !== 'string' || !WORKER_ID.test(value)) {
      throw new DomainError('VALIDATION_FAILED', `worker_id ${WORKER_ID_RULE}`, [
        { field: 'worker_id', message: WORKER_ID_RULE },
      ]);
    }
    return value;
  }
}

/** The internal API's per-worker routes; service-account tokens only. */
@ApiTags('internal (workers)')
@ApiAuthenticated()
@Controller('internal/v1/workers')
@Access('service')
export class WorkerHeartbeatsController {
  constructor(private readonly heartbeats: HeartbeatsService) {}

  /**
   * One heartbeat for every submission a worker runs: renews the leases it holds (accruing their usage) and says,
   * for each, whether to stop it. A submission it no longer holds is answered `held: false`; it never fails the batch.
   */
  @Post(':worker_id/heartbeat')
  @HttpCode(200)
  @ApiParam({
    name: 'worker_id',
    description: 'The worker, as in its claims (`worker_id`).',
    schema: { type: 'string', pattern: WORKER_ID.source },
  })
  @ApiOkResponse({ type: HeartbeatBatchView })
  // 404: a path that is not text (NUL, a lone surrogate) names no resource, as on every route.
  @ApiErrors(400, 404, 413)
  heartbeat(
    @CurrentPrincipal() principal: Principal,
    @Param('worker_id', new WorkerIdPipe()) workerId: string,
    @Body() body: HeartbeatBatchDto,
  ): Promise<HeartbeatBatchView> {
    return this.heartbeats.heartbeatMany(principal, workerId, body.submissions);
  }
}
