import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { SchedulerRegistry } from '@nestjs/schedule';
import { InjectDataSource } from '@nestjs/typeorm';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { Env } from '../../config/env';
import { MetricsService } from '../metrics/metrics.service';

const LEADER_LOCK_KEY = 0x72706c70; // 'rplp'
/** Elections never run more often than this, whatever the shortest loop's interval. */
const MIN_ELECTION_MS = 250;

export interface Loop {
  name: string;
  everyMs: number;
  pass: () => Promise<number>;
}

/**
 * Background loops (lapsed leases, sweeps of cancelled subtrees, clean-up, event retention), each pass bounded. With
 * several instances on one database, one runs them: the one whose connection of its own holds an advisory lock.
 * The lock is a transaction lock in a transaction kept open (idle, with no snapshot and no transaction id, so it
 * holds back no vacuum): that works behind a transaction-pooling PgBouncer too, which pins a server connection to
 * a client for as long as its transaction lasts, and closes it (so the lock goes) when the client dies. A session
 * lock would not: through such a pooler it would stay on a server connection that others then use. Followers try to
 * take it every election interval (half the shortest loop's), so a leader killed with kill -9 is replaced within one
 * interval of that loop.
 */
@Injectable()
export class BackgroundLoopsService implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(BackgroundLoopsService.name);
  /** This instance's election connection: it holds the lock while leading, and tries for it while following. */
  private session?: Client;
  private leading = false;
  private electing = false;
  private busy = new Set<string>();
  private stopped = false;

  private readonly loops: Loop[] = [];

  constructor(
    private readonly env: Env,
    private readonly scheduler: SchedulerRegistry,
    private readonly metrics: MetricsService,
    @InjectDataSource() private readonly dataSource: DataSource,
  ) {}

  /** Adds a loop (call from a module's onModuleInit: loops start at application bootstrap). */
  register(loop: Loop): void {
    if (this.loops.some((l) => l.name === loop.name)) throw new Error(`loop ${loop.name} registered twice`);
    this.loops.push(loop);
  }

  /** A registered loop by name (tests and the maintenance route run single passes). */
  loop(name: string): Loop {
    const found = this.loops.find((l) => l.name === name);
    if (!found) throw new Error(`no loop ${name}`);
    return found;
  }

  /**
   * How often followers try to become the leader (and the leader checks its connection): half the shortest loop's
   * interval, so a leader that dies is replaced within one interval of that loop.
   */
  get electionMs(): number {
    return Math.max(MIN_ELECTION_MS, Math.min(...this.loops.map((l) => l.everyMs), 60_000) / 2);
  }

  onApplicationBootstrap(): void {
    if (!this.env.RUNPLANE_BACKGROUND_LOOPS) return;
    this.metrics.loopsLeader.set(0);
    void this.elect();
    this.scheduler.addInterval(
      'runplane:leader-election',
      setInterval(() => void this.elect(), this.electionMs),
    );
    for (const loop of this.loops) {
      this.scheduler.addInterval(
        `runplane:${loop.name}`,
        setInterval(() => void this.tick(loop), loop.everyMs),
      );
    }
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    for (const name of ['leader-election', ...this.loops.map((l) => l.name)])
      if (this.scheduler.doesExist('interval', `runplane:${name}`)) this.scheduler.deleteInterval(`runplane:${name}`);
    while (this.busy.size > 0 || this.electing) await new Promise((r) => setTimeout(r, 20));
    // Ending the session ends its transaction: the lock goes at once and a follower takes over at its next election.
    await this.resign();
  }

  /** One pass of a loop, if this instance leads and the loop's previous pass has finished. */
  async tick(loop: Loop): Promise<number> {
    if (this.stopped || this.busy.has(loop.name) || !this.isLeader()) return 0;
    this.busy.add(loop.name);
    const end = this.metrics.loopDuration.startTimer({ loop: loop.name });
    try {
      const n = await loop.pass();
      this.metrics.loopRuns.inc({ loop: loop.name, outcome: 'ok' });
      this.metrics.loopItems.inc({ loop: loop.name }, n);
      return n;
    } catch (err) {
      this.metrics.loopRuns.inc({ loop: loop.name, outcome: 'error' });
      this.logger.error({ err, loop: loop.name }, 'background loop pass failed');
      return 0;
    } finally {
      end();
      this.busy.delete(loop.name);
    }
  }

  private isLeader(): boolean {
    // The embedded database is one process (its data directory is locked), or one shared session: lead.
    if (!this.env.DATABASE_URL || this.env.DATABASE_EMBEDDED) return true;
    return this.leading;
  }

  /** The leader checks that its session is alive; a follower tries to take the lock (on a session it keeps). */
  private async elect(): Promise<void> {
    if (this.stopped || this.electing || !this.env.DATABASE_URL || this.env.DATABASE_EMBEDDED) return;
    this.electing = true;
    try {
      const client = this.session ?? (await this.connect());
      if (this.leading) {
        await client.query('SELECT 1');
        return;
      }
      // One round trip: BEGIN and the try (the key is a constant). Through a transaction pooler, the server
      // connection stays this client's until the transaction ends: for as long as it leads.
      const results = (await client.query(
        `BEGIN; SELECT pg_try_advisory_xact_lock(${LEADER_LOCK_KEY}) AS locked`,
      )) as unknown as { rows: { locked?: boolean }[] }[];
      if (this.session !== client) return;
      if (!results[1]?.rows[0]?.locked) {
        await client.query('ROLLBACK');
        return;
      }
      this.leading = true;
      this.metrics.loopsLeader.set(1);
      this.metrics.loopsLeaderSince.set(Date.now() / 1000);
      this.metrics.loopsLeadershipAcquired.inc();
      this.logger.log('this instance runs the background loops');
    } catch (err) {
      if (this.leading) this.logger.warn({ err }, 'the background loops leader lost its database session');
      await this.resign();
    } finally {
      this.electing = false;
    }
  }

  private async connect(): Promise<Client> {
    const client = new Client({
      connectionString: (this.dataSource.options as { url?: string }).url,
      application_name: 'runplane-leader',
      connectionTimeoutMillis: 5000,
    });
    client.on('error', () => void this.lost(client));
    client.on('end', () => void this.lost(client));
    this.session = client;
    await client.connect();
    return client;
  }

  private async lost(client: Client): Promise<void> {
    if (this.session !== client) return;
    if (this.leading) this.logger.warn('the background loops leader lost its database session');
    await this.resign();
  }

  private async resign(): Promise<void> {
    const client = this.session;
    this.session = undefined;
    this.leading = false;
    this.metrics.loopsLeader.set(0);
    await client?.end().catch(() => undefined);
  }
}
