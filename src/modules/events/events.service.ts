import { Injectable, Logger } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { afterCommit } from '../../infra/database/after-commit';
import type { StatementRider } from '../../infra/database/rider';
import { Env } from '../../config/env';
import { laterOf, Position } from './event-cursor';
import type { NewEvent } from './event-types';
import { EventFilter, EventsRepository, StoredEvent } from './events.repository';
import { required } from '../../common/required';

/**
 * At most one NOTIFY per window: the first commit after a quiet window notifies at once, later ones wait for the
 * window's end and share one. Each NOTIFY is a statement and a commit of its own, and under a steady stream of
 * lifecycle commits a shorter window costs throughput (5 ms: up to 200 a second, several % of `complete`'s).
 */
const NOTIFY_EVERY_MS = 25;

export type { EventFilter, StoredEvent };

/** A batch of the feed and where the next one starts. */
export interface EventBatch {
  events: StoredEvent[];
  /**
   * The position after this batch: the last event's when the batch is full; else, every matching event below the
   * horizon having been returned, the horizon itself (xmin, 0), so a reader moves on even when nothing matched.
   */
  next: Position;
  /** The batch holds `limit` events: more may follow at once. */
  full: boolean;
  /** Committed events wait behind an older transaction (see EventsRepository.read): look again soon. */
  heldBack: boolean;
}

/**
 * The event feed's core: writes (in the caller's transaction), keyset reads, retention. Depends on no other domain
 * module, so every module that changes a status can record its events; the routes and the following live in
 * EventsFeedModule.
 */
@Injectable()
export class EventsService {
  private readonly logger = new Logger(EventsService.name);
  /** On the embedded database no LISTEN hears a notification: its followers poll. */
  private readonly notifies: boolean;
  private readonly toNotify = new Set<string>();
  private notifyTimer?: NodeJS.Timeout;

  constructor(
    private readonly events: EventsRepository,
    private readonly env: Env,
  ) {
    this.notifies = !!env.DATABASE_URL && !env.DATABASE_EMBEDDED;
  }

  /**
   * Records events in the caller's transaction (`m` must be a transaction's EntityManager): one INSERT for any
   * number of them; followers on every instance are woken after the transaction commits.
   */
  async record(m: EntityManager, events: readonly NewEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.events.insert(m, events);
    if (!this.notifies) return;
    const projects = new Set(events.map((e) => e.projectId));
    afterCommit(m, () => this.wake(projects));
  }

  /**
   * The same as `record`, as a rider on a statement of the caller's (see StatementRider): the caller must run it in
   * `m`'s transaction. Followers are woken after that transaction commits.
   */
  recordingRider(m: EntityManager, events: readonly NewEvent[]): StatementRider | undefined {
    if (events.length === 0) return undefined;
    if (this.notifies) {
      const projects = new Set(events.map((e) => e.projectId));
      afterCommit(m, () => this.wake(projects));
    }
    return this.events.rider(events);
  }

  /**
   * After commits, followers on every instance are woken by one NOTIFY naming the projects written: at once after a
   * quiet window, else at the window's end for all the commits since the last one (a follower also re-reads every
   * second anyway).
   */
  private wake(projects: ReadonlySet<string>): void {
    for (const p of projects) this.toNotify.add(p);
    if (!this.notifyTimer) this.notifyNow();
  }

  /** Sends what waits, if anything, and opens a window; a window in which nothing waited closes. */
  private notifyNow(): void {
    if (this.toNotify.size === 0) {
      this.notifyTimer = undefined;
      return;
    }
    const batch = [...this.toNotify];
    this.toNotify.clear();
    this.events.notify(batch).catch((err: unknown) => this.logger.warn({ err }, 'event notification failed'));
    this.notifyTimer = setTimeout(() => this.notifyNow(), NOTIFY_EVERY_MS);
    this.notifyTimer.unref();
  }

  /** Up to `limit` events after `after` (see EventsRepository.read for why this never skips nor repeats). */
  async read(filter: EventFilter, after: Position, limit: number): Promise<EventBatch> {
    const r = await this.events.read(filter, after, limit);
    const full = r.events.length >= limit;
    const last = r.events.length > 0 ? r.events[r.events.length - 1] : undefined;
    const next = full
      ? { txId: required(last, 'the last event').txId, seq: required(last, 'the last event').seq }
      : laterOf(after, last ? { txId: last.txId, seq: last.seq } : after, { txId: r.horizon, seq: '0' });
    return { events: r.events, next, full, heldBack: r.heldBack };
  }

  /** The position "now": before every event not yet readable, after every event that is. */
  async now(): Promise<Position> {
    return { txId: await this.events.horizon(), seq: '0' };
  }

  /**
   * One bounded retention pass: removes up to `limit` events older than RUNPLANE_EVENTS_RETENTION_HOURS and older
   * than `activeSince` (the submission of the oldest unfinished run, whose first event is its `submitted`; null when
   * every run has finished). EventsRetentionService supplies that time (this module does not read runs).
   */
  purge(limit: number, activeSince: Date | null): Promise<number> {
    // A run's submitted_at is rounded to the millisecond and its first event's `at` is not: 1 ms of margin.
    const floor = activeSince === null ? null : new Date(activeSince.getTime() - 1);
    return this.events.purge(this.env.RUNPLANE_EVENTS_RETENTION_HOURS, floor, limit);
  }
}
