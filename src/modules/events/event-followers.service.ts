import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Client, Notification } from 'pg';
import { DataSource } from 'typeorm';
import { Env } from '../../config/env';
import { EVENTS_CHANNEL } from './events.repository';
import type { Follower } from './follower';

/** On PostgreSQL: the periodic re-read behind the notifications (held-back events, a notification lost). */
const REREAD_MS = 1000;
/** On the embedded database (no LISTEN there, see below): how often followers look for new events. */
const EMBEDDED_POLL_MS = 200;
const RECONNECT_FIRST_MS = 500;
const RECONNECT_MAX_MS = 10_000;
/** How long shutdown waits for followers to end their streams. */
const CLOSE_WAIT_MS = 2000;

/**
 * This instance's followers and what wakes them. On PostgreSQL, one LISTEN connection per instance (opened with the
 * first follower) carries the notifications EventsService sends after commits (one per few milliseconds) on any
 * instance: each names the projects written, and wakes their followers. A timer wakes every follower each second
 * as well: for events held back behind an older transaction (see EventsRepository.read), and for notifications lost
 * while the LISTEN connection was down (after it comes back, everyone is woken once).
 *
 * The embedded database (PGlite behind a socket) has one backend session for every connection: a notification goes
 * out on the connection whose statement made it, never to the listener's (checked with pglite-socket 0.2.17), so
 * there followers simply read every 200 ms.
 */
@Injectable()
export class EventFollowers implements OnModuleDestroy {
  private readonly logger = new Logger(EventFollowers.name);
  private readonly byProject = new Map<string, Set<Follower>>();
  private readonly embedded: boolean;
  private timer?: NodeJS.Timeout;
  private listener?: Client;
  private listening = false;
  private reconnectMs = RECONNECT_FIRST_MS;
  private reconnectTimer?: NodeJS.Timeout;
  private stopping = false;
  /** LISTEN needs a session: DATABASE_SESSION_URL when DATABASE_URL is a transaction pooler. */
  private readonly sessionUrl?: string;

  constructor(
    env: Env,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {
    this.embedded = !env.DATABASE_URL || env.DATABASE_EMBEDDED;
    this.sessionUrl = env.DATABASE_SESSION_URL;
  }

  get closing(): boolean {
    return this.stopping;
  }

  get count(): number {
    let n = 0;
    for (const set of this.byProject.values()) n += set.size;
    return n;
  }

  /** Starts waking `f` (and, with the first follower, the LISTEN connection and the timer); stops when it ends. */
  add(f: Follower): void {
    let set = this.byProject.get(f.projectId);
    if (!set) this.byProject.set(f.projectId, (set = new Set()));
    set.add(f);
    void f.done.finally(() => this.remove(f));
    this.timer ??= setInterval(() => this.wakeAll(), this.embedded ? EMBEDDED_POLL_MS : REREAD_MS);
    if (!this.embedded && !this.listener) void this.listen();
  }

  private remove(f: Follower): void {
    const set = this.byProject.get(f.projectId);
    set?.delete(f);
    if (set?.size === 0) this.byProject.delete(f.projectId);
  }

  private wakeAll(): void {
    for (const set of this.byProject.values()) for (const f of set) f.wake();
  }

  private onNotification(n: Notification): void {
    if (n.channel !== EVENTS_CHANNEL) return;
    if (!n.payload) return this.wakeAll();
    for (const projectId of n.payload.split(',')) for (const f of this.byProject.get(projectId) ?? []) f.wake();
  }

  /** The LISTEN connection: a client of its own (never the pool's), reconnected with backoff when it drops. */
  private async listen(): Promise<void> {
    if (this.stopping) return;
    const url = this.sessionUrl ?? (this.dataSource.options as { url?: string }).url;
    const client = new Client({ connectionString: url, application_name: 'runplane-events' });
    this.listener = client;
    client.on('notification', (n) => this.onNotification(n));
    const lost = (err?: unknown) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      this.listening = false;
      client.removeAllListeners('notification');
      client.on('error', () => undefined);
      void client.end().catch(() => undefined);
      if (this.stopping) return;
      this.logger.warn({ err }, `event notifications lost; reconnecting in ${this.reconnectMs} ms`);
      this.reconnectTimer = setTimeout(() => {
        this.reconnectTimer = undefined;
        if (this.byProject.size > 0) void this.listen();
      }, this.reconnectMs);
      this.reconnectMs = Math.min(this.reconnectMs * 2, RECONNECT_MAX_MS);
    };
    client.on('error', (err) => lost(err));
    client.on('end', () => lost());
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      if (this.listener !== client) return;
      this.listening = true;
      this.reconnectMs = RECONNECT_FIRST_MS;
      this.wakeAll(); // whatever was notified while nobody listened
    } catch (err) {
      lost(err);
    }
  }

  /** Whether this instance currently receives notifications (false on the embedded database). */
  get listens(): boolean {
    return this.listening;
  }

  /** Ends every stream (they finish their current write), then closes the LISTEN connection. */
  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    clearInterval(this.timer);
    clearTimeout(this.reconnectTimer);
    const all = [...this.byProject.values()].flatMap((set) => [...set]);
    for (const f of all) f.close();
    await Promise.race([
      Promise.allSettled(all.map((f) => f.done)),
      new Promise((r) => setTimeout(r, CLOSE_WAIT_MS).unref()),
    ]);
    const client = this.listener;
    this.listener = undefined;
    this.listening = false;
    if (client) await client.end().catch(() => undefined);
  }
}
