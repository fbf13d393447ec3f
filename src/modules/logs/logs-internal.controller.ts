import { Body, Controller, HttpCode, Param, ParseUUIDPipe, Post, Query } from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiOkResponse, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { ApiAuthenticated, ApiErrors, ApiUuidParam } from '../../common/openapi/api-docs';
import { BinaryLogChunkQueryDto, LOG_STREAMS, LogChunkAckView, LogChunkDto, type LogStream } from './dto/logs.dto';
import { LogsService } from './logs.service';

const submissionId = new ParseUUIDPipe({ exceptionFactory: () => notFound('submission') });

const BINARY =
  'The same as the JSON form, the bytes themselves as the body (`Content-Type: application/octet-stream`, at most ' +
  '1 MiB): no text encoding or JSON to undo, which is what the runplane worker sends.';

const APPEND =
  'Only the holder may write (another service account: 404, another worker id: 409 `STALE_SUBMISSION`), while the ' +
  'submission is claimed or running and for a grace period after it finished (`RUNPLANE_LOG_GRACE_SECONDS`, ' +
  'default 60 s). `offset` counts the bytes of the stream sent before `data`. A resend of stored bytes is ' +
  'acknowledged and stored once (only bytes past the stored ones are added); a gap is a 409 `LOG_OFFSET_GAP`, bytes ' +
  'that disagree with stored ones a 409 `LOG_DATA_MISMATCH`, both with `accepted_length` (the bytes of the stream ' +
  "stored) in `details`. Past the submission's quota (`RUNPLANE_LOG_QUOTA_BYTES`, default 16 MiB, both streams " +
  'together) the chunk is refused whole with 413 `LOG_QUOTA_EXCEEDED` (`details`: `accepted_length`, ' +
  '`quota_bytes`, `used_bytes`): the worker then ends the job as `failed`/`log_quota_exceeded`. A refused chunk ' +
  'stores nothing.';

/** The worker's side of logs: chunks of its submissions' output. */
@ApiTags('internal (workers)')
@ApiAuthenticated()
@Controller('internal/v1/submissions')
@Access('service')
export class LogsInternalController {
  constructor(private readonly logs: LogsService) {}

  /** A chunk of a submission's stdout or stderr at a byte offset (see APPEND). */
  @Post(':id/logs')
  @ApiOperation({ summary: "Append a chunk of a submission's output", description: APPEND })
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

  /** The same chunk, its bytes as the body (see BINARY). */
  @Post(':id/logs/:stream')
  @ApiOperation({ summary: "Append bytes of a submission's output", description: `${BINARY} ${APPEND}` })
  @HttpCode(200)
  @ApiUuidParam('id', 'Submission')
  @ApiParam({ name: 'stream', enum: LOG_STREAMS })
  @ApiConsumes('application/octet-stream')
  @ApiBody({ schema: { type: 'string', format: 'binary' } })
  @ApiOkResponse({ type: LogChunkAckView })
  @ApiErrors(400, 404, 409, 413)
  appendBytes(
    @CurrentPrincipal() principal: Principal,
    @Param('id', submissionId) id: string,
    @Param('stream') stream: string,
    @Query() query: BinaryLogChunkQueryDto,
    @Body() body: unknown,
  ): Promise<LogChunkAckView> {
    if (!(LOG_STREAMS as readonly string[]).includes(stream)) throw notFound(`log stream ${stream}`);
    // No body at all (Content-Length: 0) is an empty chunk; any other type was parsed as something else.
    const bytes = Buffer.isBuffer(body) ? body : isEmpty(body) ? Buffer.alloc(0) : undefined;
    if (!bytes) {
      throw new DomainError('VALIDATION_FAILED', 'body must be application/octet-stream', [
        { field: 'body', message: 'must be application/octet-stream' },
      ]);
    }
    return this.logs.appendBytes(principal, id, query.worker_id, stream as LogStream, query.offset, bytes);
  }
}

const isEmpty = (body: unknown) =>
  body === undefined || (typeof body === 'object' && body !== null && Object.keys(body).length === 0);
