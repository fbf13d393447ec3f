import type { ServerResponse } from 'node:http';
import { encodeEventCursor, Position } from './event-cursor';
import type { EventBatch, StoredEvent } from './events.service';

/** Events read per batch: a follower holds at most one batch (and the socket's buffer) in memory. */
export const FOLLOW_BATCH = 200;
/** Held-back events: look again after 10 ms, doubling up to 80 ms, until they are readable. */
const HELD_BACK_FIRST_MS = 10;
const HELD_BACK_MAX_MS = 80;
/** A failed read (the database away): try again after 1 s, doubling up to 8 s; the stream stays open. */
const ERROR_FIRST_MS = 1000;
const ERROR_MAX_MS = 8000;

export interface FollowerOptions {
  projectId: string;
  start: Position;
  res: ServerResponse;
  read: (after: Position, limit: number) => Promise<EventBatch>;
  /** The event as its JSON text. */
  render: (e: StoredEvent) => string;
  /** Still allowed to read this project? Asked at every heartbeat; false ends the stream. */
  stillAllowed: () => Promise<boolean>;
  heartbeatMs: number;
  onError: (err: unknown) => void;
}

/**
 * One client following the feed over Server-Sent Events. It reads a batch when woken (a notification for its
 * project, the periodic re-read, a held-back retry), writes it, and reads again at once while batches come full;
 * when the socket's buffer is full it waits for 'drain' before reading more, so its memory stays bounded whatever the
 * feed's rate. Each event is `id: <cursor>`, `event: <type>`, `data: <JSON>`; the stream starts with the start
 * position as a bare `id:` (so EventSource reconnects from there even before the first event) and a heartbeat
 * comment (with the current position) comes every `heartbeatMs`.
 */
export class Follower {
  readonly done: Promise<void>;
  private cursor: Position;
  private sentId: string;
  private woken = true;
  private closed = false;
  private wakeUp?: () => void;
  private retryTimer?: NodeJS.Timeout;
  private heartbeat?: NodeJS.Timeout;
  private heldBackMs = HELD_BACK_FIRST_MS;
  private errorMs = ERROR_FIRST_MS;
  /** After a failed read, no other before this time (wake-ups meanwhile wait for it). */
  private pausedUntil = 0;

  constructor(private readonly o: FollowerOptions) {
    this.cursor = o.start;
    this.sentId = encodeEventCursor(o.start);
    this.o.res.write(`retry: 2000\nid: ${this.sentId}\n\n`);
    this.heartbeat = setInterval(() => void this.beat(), o.heartbeatMs);
    this.done = this.loop();
  }

  get projectId(): string {
    return this.o.projectId;
  }

  /** Something may have been written for this follower: read again (soon, or right after the current read). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Ends the stream (client gone, access lost, server shutting down); safe to call more than once. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.retryTimer);
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    try {
      while (!this.closed) {
        if (!this.woken) await new Promise<void>((resolve) => (this.wakeUp = resolve));
        this.wakeUp = undefined;
        if (this.closed) break;
        this.woken = false;
        const paused = this.pausedUntil - Date.now();
        if (paused > 0) {
          this.later(paused);
          continue;
        }
        let batch: EventBatch;
        try {
          batch = await this.o.read(this.cursor, FOLLOW_BATCH);
          this.errorMs = ERROR_FIRST_MS;
        } catch (err) {
          if (this.errorMs === ERROR_FIRST_MS) this.o.onError(err); // once per outage, not once per retry
          this.pausedUntil = Date.now() + this.errorMs;
          this.later(this.errorMs);
          this.errorMs = Math.min(this.errorMs * 2, ERROR_MAX_MS);
          continue;
        }
        if (this.closed) break;
        let chunk = '';
        for (const e of batch.events) {
          const id = encodeEventCursor({ txId: e.txId, seq: e.seq });
          chunk += `id: ${id}\nevent: ${e.type}\ndata: ${this.o.render(e)}\n\n`;
          this.sentId = id;
        }
        this.cursor = batch.next;
        if (chunk && !this.o.res.write(chunk)) await this.drained();
        if (batch.full) {
          this.woken = true;
        } else if (batch.heldBack) {
          this.later(this.heldBackMs);
          this.heldBackMs = Math.min(this.heldBackMs * 2, HELD_BACK_MAX_MS);
        } else {
          this.heldBackMs = HELD_BACK_FIRST_MS;
        }
      }
    } finally {
      this.close();
      if (!this.o.res.writableEnded) this.o.res.end();
    }
  }

  private later(ms: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.wake(), ms);
  }

  private drained(): Promise<void> {
    if (this.o.res.destroyed) return Promise.resolve(this.close());
    return new Promise((resolve) => {
      const done = () => {
        this.o.res.off('drain', done);
        this.o.res.off('close', done);
        resolve();
      };
      this.o.res.on('drain', done);
      this.o.res.on('close', done);
    });
  }

  /** A comment that keeps proxies from timing the stream out, with the position reached; then an access check. */
  private async beat(): Promise<void> {
    if (this.closed) return;
    const id = encodeEventCursor(this.cursor);
    // Past a full buffer the client is not reading: no point adding to it.
    if (!this.o.res.writableNeedDrain) {
      this.o.res.write(id === this.sentId ? ': heartbeat\n\n' : `: heartbeat\nid: ${id}\n\n`);
      this.sentId = id;
    }
    try {
      if (!(await this.o.stillAllowed())) this.close();
    } catch (err) {
      this.o.onError(err); // the database away: keep the stream, check again at the next beat
    }
  }
}
