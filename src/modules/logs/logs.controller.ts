import { Controller, Get, Headers, Param, Query, Req, Res } from '@nestjs/common';
import { ApiExtraModels, ApiHeader, ApiOperation, ApiResponse, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Access, CurrentPrincipal, type Principal } from '../../common/auth/principal';
import { validationFailed } from '../../common/errors/domain-error';
import { acceptsEventStream, SseStream } from '../../common/http/sse';
import { ApiAuthenticated, ApiErrors, ApiProjectParam, ApiUuidParam, PageOf } from '../../common/openapi/api-docs';
import { MAX_CURSOR_LENGTH } from '../../common/pagination/cursor';
import { LogChunkView, LogQueryDto } from './dto/logs.dto';
import { LogsService } from './logs.service';

const LogChunkPage = PageOf(LogChunkView);

const EVENT_STREAM =
  'With `Accept: text/event-stream` or `follow=true`: Server-Sent Events. Each chunk is an event `chunk` whose ' +
  '`data` is the chunk as in a page and whose `id` resumes after it (send it back as `Last-Event-ID`, or as ' +
  '`cursor`); once the submission has finished and every chunk was sent, one event `end` with `data` ' +
  '`{submission_num, status, termination_reason}`, and the stream closes (EventSource clients: close on `end`, or ' +
  'they reconnect). A comment line every 15 s keeps the connection alive.';

/** Jobs' output for users: pages of chunks, or a stream of them as they come. */
@ApiTags('logs')
@ApiAuthenticated()
@Controller('api/v1')
@Access('user')
@ApiExtraModels(LogChunkPage)
export class LogsController {
  constructor(private readonly logs: LogsService) {}

  /**
   * A job's output: by default its latest submission's, both streams in the order they were written. Pages carry at
   * most `limit` chunks and stop adding chunks past 4 MiB of data.
   */
  @Get('projects/:project/runs/:runId/jobs/:jobId/logs')
  @ApiOperation({
    summary: "A job's output, paged or followed",
    description:
      "Default: the job's latest submission (`submission_num` picks another attempt), both streams in the order " +
      'they were written (`stream` picks one, in byte order). Each chunk is its bytes at `offset` of its stream: ' +
      "concatenating a stream's chunks gives the output byte for byte (`encoding: base64` for bytes that are not " +
      'UTF-8 text). A page holds at most `limit` chunks and stops adding chunks past 4 MiB of data.',
  })
  @ApiProjectParam()
  @ApiUuidParam('runId', 'Run')
  @ApiUuidParam('jobId', 'Job')
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'Following: resume after this event (an `id` of an earlier `chunk` event); wins over `cursor`.',
    schema: { type: 'string', maxLength: MAX_CURSOR_LENGTH },
  })
  @ApiResponse({
    status: 200,
    description:
      'A page of chunks. `next_cursor` is null once the submission has finished and every chunk was read; until ' +
      `then it is where to ask again, even after an empty page. ${EVENT_STREAM}`,
    content: {
      'application/json': { schema: { $ref: getSchemaPath(LogChunkPage) } },
      'text/event-stream': { schema: { type: 'string', description: EVENT_STREAM } },
    },
  })
  @ApiErrors(400, 404)
  async read(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Param('runId') runId: string,
    @Param('jobId') jobId: string,
    @Query() q: LogQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: FastifyRequest,
    @Res() res: FastifyReply,
  ): Promise<void> {
    // HEAD gets a page's headers, never a stream.
    const follow = req.method === 'GET' && (q.follow ?? acceptsEventStream(req.raw));
    if (lastEventId !== undefined && lastEventId.length > MAX_CURSOR_LENGTH)
      throw validationFailed('Last-Event-ID', `must be at most ${MAX_CURSOR_LENGTH} characters`);
    const after = this.logs.position(follow && lastEventId ? lastEventId : q.cursor);
    const target = await this.logs.target(p, project, runId, jobId, q.submission_num);
    if (!follow) {
      void res.status(200).send(await this.logs.page(target, q, after));
      return;
    }
    // The stream is written to the socket's response as events come: Fastify sends nothing more for it.
    res.hijack();
    const sse = new SseStream(res.raw);
    try {
      for await (const ev of this.logs.follow(target, q.stream, after, sse.signal)) {
        if (ev.kind === 'chunk') await sse.send({ event: 'chunk', id: ev.id, data: JSON.stringify(ev.chunk) });
        else await sse.send({ event: 'end', data: JSON.stringify(ev) });
      }
    } catch {
      // Past the headers an error can only end the stream; the client resumes with Last-Event-ID.
    } finally {
      sse.end();
    }
  }
}
