import type { Duplex } from 'node:stream';
import { Client, type ClientConfig, type PoolClient } from 'pg';
import type { DataSourceOptions } from 'typeorm';
import { MIGRATIONS } from '../../../migrations';
import { commitQueued } from './commit-ahead';
import { SnakeNamingStrategy } from './snake-naming.strategy';

export interface ConnectionSettings {
  url: string;
  poolSize: number;
  /** How long an unused connection stays open (default 60 s; see Env.DATABASE_POOL_IDLE_SECONDS). */
  idleSeconds?: number;
  /** Embedded database: one session; waits for the pool turn into an error instead of a hang. */
  embedded: boolean;
  /** Named prepared statements (default on; off behind a transaction pooler that does not track them). */
  namedStatements?: boolean;
  /** statement_timeout of every session, in ms (default 0: none). */
  statementTimeoutMs?: number;
}

/** The one place TypeORM's options are built, for the app, the CLI and the tests alike. */
export function dataSourceOptions(settings: ConnectionSettings): DataSourceOptions {
  // A session of its own for each connection, whose statements it can name and pipeline.
  const ownSessions = !settings.embedded && settings.namedStatements !== false;
  return {
    type: 'postgres',
    url: settings.url,
    poolSize: settings.poolSize,
    migrations: MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    namingStrategy: new SnakeNamingStrategy(),
    uuidExtension: 'pgcrypto',
    installExtensions: false, // gen_random_uuid() is built in since PostgreSQL 13
    applicationName: 'runplane',
    extra: {
      connectionTimeoutMillis: settings.embedded ? 30_000 : 10_000,
      idleTimeoutMillis: (settings.idleSeconds ?? 60) * 1000,
      // Postgres sends timestamps as text; keep them exact and UTC. No JIT: this is short OLTP work, and a list page's
      // history walk, estimated big, was compiled afresh on every request (6 ms of a 20 ms statement). Generic plans
      // for named statements (only the hot path's, by primary keys and arrays of ids): with custom plans PostgreSQL
      // planned each statement taking arrays afresh at every execution (0.1–0.2 ms a bind); unnamed ones (every
      // other query) are planned for their parameters as before.
      options: [
        '-c timezone=UTC -c jit=off -c plan_cache_mode=force_generic_plan',
        statementTimeout(settings.statementTimeoutMs),
      ]
        .filter(Boolean)
        .join(' '),
      // Read by preparedQuery: the embedded database is one session shared by every client connection, so a
      // statement name one connection prepared would clash on the next; there, statements stay unnamed. So behind a
      // transaction pooler that hands each transaction any server connection (DATABASE_NAMED_STATEMENTS=false).
      namedStatements: ownSessions,
      // pg writes each query as soon as it is queued rather than after the previous one's answer: a transaction's
      // statements queued together (BEGIN and the first; a finish's billing and counting: JobFinisher) reach the
      // server in one round trip, and it runs the next while this process is still busy with others' requests
      // (single-report completions 1.04× alone, 1.14× with the finisher's pair; alternated rounds, README). Not on
      // the embedded database (one session, served message by message), nor behind a transaction pooler
      // (DATABASE_NAMED_STATEMENTS=false): Debian's PgBouncer 1.18 predates its support for pipelined statements.
      pipeline: ownSessions,
      // Read by runMigrationsLocked: the embedded database's one connection holds the lock and runs the migrations.
      embedded: settings.embedded,
      Client: ListenedClient,
    },
  };
}

const statementTimeout = (ms?: number) => (ms ? `-c statement_timeout=${ms}` : '');

/** What ListenedClient uses of pg's Client beyond its typings (pg 8.23: lib/client.js). */
interface PgClientInternals {
  pipeline: boolean;
  _connected: boolean;
  connection: { stream: Duplex };
  /** Writes what is queued (every query, when pipelining) to the connection. */
  _pulseQueryQueue(): void;
}

const pulseQueryQueue = (Client.prototype as unknown as PgClientInternals)._pulseQueryQueue;
type Query = (this: Client, ...args: unknown[]) => unknown;

/**
 * A pg client that always has an 'error' listener, and that writes a pipelining connection's queries of one tick
 * together.
 * - Listener: pg-pool removes its own listener when it hands a connection out, and TypeORM adds its listener a
 *   microtask later; a new connection whose session the server ends at once (its ReadyForQuery and the FATAL in one
 *   packet: pg_terminate_backend, a restart) emitted 'error' with nobody listening in between, and an unhandled
 *   'error' event crashes the process. The error still reaches the query, the pool and TypeORM as before; this
 *   listener only keeps it from being unhandled.
 * - Writes: pg corks the socket around each query alone, so pipelined queries cost a write (a system call, and a
 *   wake-up of the database's process) each. Corked until the tick's promise jobs have run (process.nextTick: after
 *   the microtask queue drains, before any I/O), the queries queued meanwhile go out in one write: a report
 *   transaction's BEGIN and first statement, billing's statement and the counting's (JobFinisher). Through the
 *   throughput bench, writes per transaction of reports went from ~6.5 to ~4.4 (the server's write calls counted
 *   from /proc), and those system calls had been 15 % of the server's CPU on that path.
 * - COMMIT queued ahead (commit-ahead.ts): a statement queued after it on the connection would run outside its
 *   transaction, so it is refused (a bug in the caller: it said its statement was the last).
 */
class ListenedClient extends Client {
  private corked = false;

  constructor(config?: string | ClientConfig) {
    super(config);
    this.on('error', () => undefined);
  }

  _pulseQueryQueue(): void {
    const self = this as unknown as PgClientInternals;
    const stream = self.connection.stream;
    if (self.pipeline && self._connected && !this.corked && !stream.destroyed) {
      this.corked = true;
      stream.cork();
      process.nextTick(() => {
        this.corked = false;
        stream.uncork();
      });
    }
    pulseQueryQueue.call(this);
  }
}

(ListenedClient.prototype as unknown as { query: Query }).query = function (this: Client, ...args: unknown[]) {
  if (commitQueued(this as PoolClient)) throw new Error('a statement queued after its transaction’s COMMIT');
  // pg's own, looked up at each call (a test's statement counting wraps it).
  return (Client.prototype.query as Query).apply(this, args);
};
