import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { notFound } from '../../common/errors/domain-error';
import { ApiAuthenticated, ApiErrors, ApiUuidParam } from '../../common/openapi/api-docs';
import { LogChunkAckView, LogChunkDto } from './dto/logs.dto';
import { LogsService } from './logs.service';

const submissionId = new ParseUUIDPipe({ exceptionFactory: () => notFound('submission') });

/** The worker's side of logs: chunks of its submissions' output. */
@ApiTags('internal (workers)')
@ApiAuthenticated()
@Controller('internal/v1/submissions')
@Access('service')
export class LogsInternalController {
  constructor(private readonly logs: LogsService) {}

  /**
   * A chunk of a submission's stdout or stderr at a byte offset. Only the holder may write (another account: 404,
   * another worker id: 409 `STALE_SUBMISSION`), while the submission runs and for a grace period after it finished
   * (`RUNPLANE_LOG_GRACE_SECONDS`, default 60). A resend of stored bytes is acknowledged and stored once; a gap is a
   * 409 `LOG_OFFSET_GAP`, bytes disagreeing with stored ones a 409 `LOG_DATA_MISMATCH` (both with `accepted_length`
   * in `details`); past the submission's quota (`RUNPLANE_LOG_QUOTA_BYTES`, default 16 MiB, both streams) a 413
   * `LOG_QUOTA_EXCEEDED`: the worker ends the job as `failed`/`log_quota_exceeded`. A refused chunk stores nothing.
   */
  @Post(':id/logs')
  @HttpCode(200)
  @ApiUuidParam('id', 'Submission')
  @ApiOkResponse({ type: LogChunkAckView })
  @ApiErrors(400, 404, 409, 413)
  append(
    @CurrentPrincipal() principal: Principal,
    @Param('id', submissionId) id: string,
    @Body() body: LogChunkDto,
  ): Promise<LogChunkAckView> {
    return this.logs.append(principal, id, body);
  }
}
