import { Injectable, Logger } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply } from 'fastify';
import { Principal } from '../../common/auth/principal';
import { DomainError } from '../../common/errors/domain-error';
import { Page } from '../../common/pagination/cursor';
import { retryReadOnce } from '../../infra/database/read-retry';
import { ProjectsService } from '../projects/projects.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { UsersService } from '../users/users.service';
import { EventsQueryDto, EventView } from './dto/events.dto';
import { decodeEventCursor, encodeEventCursor, Position, START } from './event-cursor';
import { EventFollowers } from './event-followers.service';
import { EventType } from './event-types';
import { EventFilter, EventsService, StoredEvent } from './events.service';
import { Follower } from './follower';

/** A comment every 15 s keeps idle streams open through proxies; access is checked again each time. */
const HEARTBEAT_MS = 15_000;

interface Scope {
  filter: EventFilter;
  projectName: string;
}

/** The feed's route: a keyset page, or (Accept: text/event-stream) the same feed followed as Server-Sent Events. */
@Injectable()
export class EventsFeedService {
  private readonly logger = new Logger(EventsFeedService.name);
  /** Between heartbeats of a stream (a setting for tests). */
  heartbeatMs = HEARTBEAT_MS;

  constructor(
    private readonly events: EventsService,
    private readonly followers: EventFollowers,
    private readonly projects: ProjectsService,
    private readonly runs: RunAccessService,
    private readonly users: UsersService,
    private readonly runStatus: RunStatusService,
  ) {}

  /** Project members see its feed; `run_id` must be a run of the project (else 404, as for the runs routes). */
  private async scope(principal: Principal, project: string, q: EventsQueryDto): Promise<Scope> {
    const access = q.run_id
      ? (await this.runs.requireRun(principal, project, q.run_id)).access
      : await this.projects.requireAccess(principal, project);
    const types = q.type ? ([...new Set(q.type.split(','))] as EventType[]) : undefined;
    return { filter: { projectId: access.projectId, runId: q.run_id, types }, projectName: access.projectName };
  }

  /**
   * A page of at most `limit` events after `cursor` (from the beginning without one). `next_cursor` is never null:
   * it is the position after the last item, or (on a short page) after everything readable so far, so a poller
   * passes it back to get what comes next.
   */
  async page(principal: Principal, project: string, q: EventsQueryDto): Promise<Page<EventView>> {
    // The status events of this instance's commits before the request are recorded first (RunStatusService).
    await this.runStatus.settled();
    const { filter, projectName } = await this.scope(principal, project, q);
    const after = q.cursor ? decodeEventCursor(q.cursor) : START;
    const batch = await retryReadOnce(() => this.events.read(filter, after, q.limit));
    return { items: batch.events.map((e) => toEventView(e, projectName)), next_cursor: encodeEventCursor(batch.next) };
  }

  /**
   * Follows the feed on `res` until the client goes away or the server shuts down. Starts after `Last-Event-ID`
   * (what EventSource sends when it reconnects, with the original URL: it wins over `cursor`), else after `cursor`,
   * else from now (every event not yet readable when the stream opens). Errors before the stream starts are the
   * usual error JSON.
   */
  async follow(
    principal: Principal,
    project: string,
    q: EventsQueryDto,
    lastEventId: string | undefined,
    req: IncomingMessage,
    reply: FastifyReply,
  ): Promise<void> {
    const { filter, projectName } = await this.scope(principal, project, q);
    let start: Position;
    if (lastEventId !== undefined && lastEventId !== '') start = decodeEventCursor(lastEventId, 'Last-Event-ID');
    else if (q.cursor) start = decodeEventCursor(q.cursor);
    else start = await retryReadOnce(() => this.events.now());
    if (this.followers.closing) throw new DomainError('SERVICE_UNAVAILABLE', 'the server is shutting down');
    const token = /^Bearer\s+(\S+)/i.exec(req.headers.authorization ?? '')?.[1] ?? '';
    // From here the stream is written to the socket's response as events come: Fastify sends nothing more for it.
    reply.hijack();
    const res = reply.raw;
    res.statusCode = 200;
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();
    req.socket.setNoDelay(true);
    const follower = new Follower({
      projectId: filter.projectId,
      start,
      res,
      read: (after, limit) => this.events.read(filter, after, limit),
      render: (e) => JSON.stringify(toEventView(e, projectName)),
      stillAllowed: async () => {
        const again = await this.users.authenticate(token);
        if (!again) return false;
        try {
          await this.projects.requireAccess(again, project);
          return true;
        } catch (err) {
          if (err instanceof DomainError && (err.code === 'FORBIDDEN' || err.code === 'NOT_FOUND')) return false;
          throw err;
        }
      },
      heartbeatMs: this.heartbeatMs,
      onError: (err) => this.logger.warn({ err }, 'event stream: read failed; trying again'),
    });
    res.once('close', () => follower.close());
    if (res.destroyed || req.socket.destroyed) follower.close(); // gone while access was checked
    this.followers.add(follower);
  }
}

export function toEventView(e: StoredEvent, project: string): EventView {
  return {
    seq: Number(e.seq),
    at: e.at.toISOString(),
    type: e.type as EventType,
    project,
    run_id: e.runId,
    job_group_id: e.jobGroupId,
    job_id: e.jobId,
    submission_num: e.submissionNum,
    status: e.status,
    reason: e.reason,
    by: e.actor,
  };
}
