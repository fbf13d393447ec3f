import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';

/**
 * Telling "the database is away" apart from everything else, whatever layer raised it: the server (SQLSTATE), the
 * socket (errno), pg and pg-pool (plain Errors with fixed messages) or TypeORM. Such failures are the service's, not
 * the request's: they become 503 DATABASE_UNAVAILABLE with Retry-After, never 500.
 */

/** SQLSTATEs meaning the session ended or could not start. Class 08 (connection exception) is matched whole. */
const SESSION_LOST_STATES = new Set([
  '57P01', // admin_shutdown: pg_terminate_backend, or the server shutting down
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up, shutting down, recovering
  '57P05', // idle_session_timeout
  '53300', // too_many_connections
]);

/** SQLSTATEs that only arise while opening a connection: the database named or the credentials are refused. */
const CONNECT_REFUSED_STATES = new Set(['3D000', '28000', '28P01']);

/** Socket errors on the way to the server. */
const SOCKET_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);

/** pg's and pg-pool's messages for a connection that died, never came up, or was not handed out in time. */
const LOST_MESSAGES = [
  'Connection terminated', // "... unexpectedly", "... due to connection timeout"
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];
const ACQUIRE_TIMEOUT_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Connection terminated due to connection timeout',
  'timeout expired',
];

export type DatabaseFailure =
  /** The connection died or could not be opened; trying again on a new connection may well work. */
  | 'connection_lost'
  /** No connection within the pool's connect timeout, or the server refused this database or these credentials:
   * trying again at once would only wait as long again. */
  | 'unreachable';

/** What kind of database failure `err` is, or undefined when it is something else (a query's own error, a bug). */
export function databaseFailure(err: unknown): DatabaseFailure | undefined {
  // TypeORM releases a query runner whose connection emitted an error; the next statement on it (or on its
  // transaction's EntityManager) then meets one of these.
  if (err instanceof QueryRunnerAlreadyReleasedError || err instanceof QueryRunnerProviderAlreadyReleasedError)
    return 'connection_lost';
  const cause = err instanceof QueryFailedError ? (err.driverError as unknown) : err;
  if (typeof cause !== 'object' || cause === null) return undefined;
  const e = cause as { code?: unknown; message?: unknown; errors?: unknown; cause?: unknown };
  const code = typeof e.code === 'string' ? e.code : undefined;
  const message = typeof e.message === 'string' ? e.message : '';
  if (ACQUIRE_TIMEOUT_MESSAGES.some((m) => message.startsWith(m))) return 'unreachable';
  if (code && CONNECT_REFUSED_STATES.has(code)) return 'unreachable';
  if (code && (SESSION_LOST_STATES.has(code) || /^08[0-9A-Z]{3}$/.test(code) || SOCKET_ERRNOS.has(code)))
    return 'connection_lost';
  if (LOST_MESSAGES.some((m) => message.startsWith(m))) return 'connection_lost';
  // Node's connect tries every address of a host name and reports all failures at once.
  if (Array.isArray(e.errors) && e.errors.some((inner) => databaseFailure(inner) !== undefined))
    return 'connection_lost';
  return undefined;
}

const RETRIED = Symbol('runplane.retriedAfterConnectionLoss');

/** Marks an error as already retried once, so an outer layer does not retry the same failure again. */
export function markRetried(err: unknown): void {
  if (typeof err === 'object' && err !== null) (err as Record<symbol, boolean>)[RETRIED] = true;
}

/** A lost connection worth one more try: not yet retried, and not a wait that would only repeat itself. */
export function isRetryableConnectionLoss(err: unknown): boolean {
  if (typeof err === 'object' && err !== null && (err as Record<symbol, boolean>)[RETRIED]) return false;
  return databaseFailure(err) === 'connection_lost';
}
