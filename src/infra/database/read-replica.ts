import { AsyncLocalStorage } from 'node:async_hooks';
import { Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Counter, Gauge } from 'prom-client';
import { DataSource, DataSourceOptions, QueryRunner, ReplicationMode } from 'typeorm';
import { Env } from '../../config/env';
import { MetricsService } from '../metrics/metrics.service';
import { dataSourceOptions } from './data-source-options';
import { teachTypes } from './database.module';

/** Queries made inside `read()` whose standby was fresh enough go there (see ReadReplica). */
const scope = new AsyncLocalStorage<{ replica: DataSource }>();
/** The one ReadReplica of the process, for the @FromReplica decorator. */
let current: ReadReplica | undefined;

/**
 * Reads from a hot standby (DATABASE_READ_URL) for the heavy read-only pages, never at the price of an older state:
 * a read goes to the standby only if, when it starts, the standby has replayed the primary's WAL up to the primary's
 * insert position at that moment. Every write acknowledged before the read began (by this client or any other, on
 * any instance) is then visible there; otherwise the read runs on the primary. Inside a `read()`, every query that
 * would take a connection from the primary's pool (transactions included: read-only ones, on a standby) takes one
 * from the standby's instead; so the services and repositories called need not know. Writes must not be made
 * inside: the standby refuses them.
 */
@Injectable()
export class ReadReplica implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(ReadReplica.name);
  private replica?: DataSource;
  private readonly reads: Counter;

  constructor(
    private readonly env: Env,
    @InjectDataSource() private readonly primary: DataSource,
    metrics: MetricsService,
  ) {
    const lagNow = () => this.lag();
    this.reads = new Counter({
      name: 'runplane_replica_reads_total',
      help: 'Reads that may use the standby (DATABASE_READ_URL), by where they ran and why',
      labelNames: ['served_by', 'reason'],
      registers: [metrics.registry],
    });
    new Gauge({
      name: 'runplane_replica_lag_bytes',
      help: "WAL bytes the standby has still to replay behind the primary's insert position (at scrape)",
      registers: [metrics.registry],
      async collect() {
        const lag = await lagNow();
        if (lag) this.set(lag.bytes);
      },
    });
    new Gauge({
      name: 'runplane_replica_lag_seconds',
      help: 'Age of the last transaction the standby replayed, 0 when it has replayed everything (at scrape)',
      registers: [metrics.registry],
      async collect() {
        const lag = await lagNow();
        if (lag) this.set(lag.seconds);
      },
    });
  }

  get enabled(): boolean {
    return this.replica !== undefined;
  }

  async onModuleInit(): Promise<void> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the decorator's way to this process's instance
    current = this;
    if (!this.env.DATABASE_READ_URL) return;
    const options = {
      ...dataSourceOptions({
        url: this.env.DATABASE_READ_URL,
        poolSize: this.env.DATABASE_POOL_SIZE,
        embedded: false,
        idleSeconds: this.env.DATABASE_POOL_IDLE_SECONDS,
        namedStatements: this.env.DATABASE_NAMED_STATEMENTS,
        statementTimeoutMs: this.env.DATABASE_STATEMENT_TIMEOUT_MS,
      }),
      applicationName: 'runplane-replica',
      migrations: [],
      // The same entities as the primary's: repositories of a transaction's manager resolve against them.
      entities: this.primary.entityMetadatas.map((m) => m.target),
    } as DataSourceOptions;
    const replica = new DataSource(options);
    teachTypes(replica);
    // A standby that is away at start is not fatal: reads go to the primary until it answers.
    await replica.initialize().catch((err: unknown) => {
      this.logger.warn({ err }, 'the read standby (DATABASE_READ_URL) does not answer; reads use the primary');
    });
    this.replica = replica;
    const createQueryRunner = this.primary.createQueryRunner.bind(this.primary);
    this.primary.createQueryRunner = (mode?: ReplicationMode): QueryRunner => {
      const inScope = scope.getStore();
      return inScope ? inScope.replica.createQueryRunner(mode) : createQueryRunner(mode);
    };
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.replica?.isInitialized) await this.replica.destroy();
  }

  /** Runs `work` with its queries on the standby when it is fresh enough, else on the primary. */
  async read<T>(work: () => Promise<T>): Promise<T> {
    const replica = this.replica;
    if (!replica) return work();
    let reason = 'behind';
    try {
      if (!replica.isInitialized) await replica.initialize();
      const [{ lsn }] = await this.primary.query('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      // Replay only moves forward: once it has passed `lsn`, every later statement on the standby sees those writes.
      let fresh = await this.replayedUpTo(replica, lsn);
      if (!fresh) {
        await new Promise((r) => setTimeout(r, 5)); // the standby is usually only milliseconds behind
        fresh = await this.replayedUpTo(replica, lsn);
      }
      if (fresh) reason = 'fresh';
    } catch (err) {
      this.logger.warn({ err }, 'the read standby failed; reading from the primary');
      reason = 'unavailable';
    }
    if (reason === 'fresh') {
      this.reads.inc({ served_by: 'replica', reason });
      return scope.run({ replica }, work);
    }
    this.reads.inc({ served_by: 'primary', reason });
    return work();
  }

  private async replayedUpTo(replica: DataSource, lsn: string): Promise<boolean> {
    const [row] = await replica.query('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS fresh', [lsn]);
    return row?.fresh === true;
  }

  /** The standby's lag, or undefined without a standby (or when either server does not answer). */
  async lag(): Promise<{ bytes: number; seconds: number } | undefined> {
    const replica = this.replica;
    if (!replica?.isInitialized) return undefined;
    try {
      const [{ lsn }] = await this.primary.query('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      const [row] = await replica.query(
        `SELECT greatest(pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn()), 0)::float8 AS bytes,
                CASE WHEN pg_last_wal_replay_lsn() >= $1::pg_lsn THEN 0
                     ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END AS seconds`,
        [lsn],
      );
      return { bytes: Number(row.bytes), seconds: Math.max(0, Number(row.seconds ?? 0)) };
    } catch {
      return undefined;
    }
  }
}

/**
 * Marks a read-only service method whose queries may be served by the standby (see ReadReplica.read). Without
 * DATABASE_READ_URL it changes nothing. The method must not write.
 */
export function FromReplica(): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const method = descriptor.value as (...args: unknown[]) => Promise<unknown>;
    descriptor.value = function (this: unknown, ...args: unknown[]) {
      const replica = current;
      if (!replica?.enabled || scope.getStore()) return method.apply(this, args);
      return replica.read(() => method.apply(this, args));
    };
    return descriptor;
  };
}
