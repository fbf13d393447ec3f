import { Controller, Get, Headers, Param, Query, Req, Res } from '@nestjs/common';
import { ApiExtraModels, ApiHeader, ApiOkResponse, ApiOperation, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { preferredType } from '../../common/http/sse';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { ApiAuthenticated, ApiErrors, ApiProjectParam, PageOf } from '../../common/openapi/api-docs';
import { EventsQueryDto, EventView } from './dto/events.dto';
import { EVENT_TYPE_MEANINGS, EVENT_TYPES } from './event-types';
import { EventsFeedService } from './events-feed.service';

const DESCRIPTION = `The project's event feed: every change of a run's, job's or group's status, every cancellation \
and budget stop, recorded in the transaction of the change. Types:
${EVENT_TYPES.map((t) => `- \`${t}\`: ${EVENT_TYPE_MEANINGS[t]}.`).join('\n')}

**Pages** (\`Accept: application/json\`, the default): at most \`limit\` events after \`cursor\` (from the beginning \
without one), oldest first. Keyset pages never skip nor repeat an event. \`next_cursor\` is never null: it is the \
position after the last item, or, on a short page, after everything readable so far; pass it back to poll for what \
comes next.

**Following** (\`Accept: text/event-stream\`): the same feed as Server-Sent Events, kept open until the client goes \
away: \`id:\` is the event's cursor, \`event:\` its type, \`data:\` the event as JSON (as in a page). It starts after \
the \`Last-Event-ID\` header (sent by EventSource when it reconnects; it wins over \`cursor\`), else after \`cursor\`, \
else from now. The first message is a bare \`id:\` (the start position); a comment comes every 15 s (with the \
position reached), when the caller's token and membership are checked again: the stream ends once either is gone. \
\`limit\` does not apply. Any instance serves any follower.

**Order**: by transaction, then \`seq\` (the cursor), not by \`seq\` alone: an event written after another event's \
transaction committed comes after it, and a reader that has seen an event is never shown an earlier one. An event \
becomes readable once every transaction that started before it was written has ended: a long transaction delays the \
feed, never reorders it. Events are kept RUNPLANE_EVENTS_RETENTION_HOURS (default 168), and never removed from the \
first event of the oldest unfinished run on.`;

@ApiTags('events')
@ApiAuthenticated()
@ApiExtraModels(PageOf(EventView))
@Controller('api/v1')
@Access('user')
// No interceptor (ReadRetryInterceptor, RawJsonInterceptor): a stream must not be retried or re-serialised. The page
// read retries a lost connection itself.
export class EventsController {
  constructor(private readonly feed: EventsFeedService) {}

  @Get('projects/:project/events')
  @ApiOperation({ summary: 'The event feed, a page or followed (SSE)', description: DESCRIPTION })
  @ApiProjectParam()
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'With `Accept: text/event-stream`: resume after this event (an `id:` of an earlier stream).',
    schema: { type: 'string', maxLength: 64 },
  })
  @ApiOkResponse({
    description: 'A page of events (JSON), or the followed feed (`text/event-stream`).',
    content: {
      'application/json': { schema: { $ref: getSchemaPath(PageOf(EventView)) } },
      'text/event-stream': { schema: { type: 'string', description: 'Server-Sent Events: id, event, data.' } },
    },
  })
  @ApiErrors(400, 404)
  async events(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Query() q: EventsQueryDto,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() req: FastifyRequest,
    @Res() res: FastifyReply,
  ): Promise<void> {
    if (preferredType(req.headers.accept, ['application/json', 'text/event-stream']) === 'text/event-stream')
      return this.feed.follow(p, project, q, lastEventId, req.raw, res);
    void res.status(200).send(await this.feed.page(p, project, q));
  }
}
