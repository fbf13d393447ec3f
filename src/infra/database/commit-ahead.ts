import type { PoolClient } from 'pg';
import { QueryFailedError, type QueryRunner } from 'typeorm';

/**
 * Committing with a transaction's last statement: COMMIT queued right behind it, so both reach the server in one
 * write (on a pipelining connection) and the transaction ends one round trip sooner. The caller must know that
 * nothing follows, whatever that statement answers; a statement that might call for more (a follow-up the caller
 * would only learn of from its answer) is written to refuse instead, raising COMMIT_AHEAD_REFUSED (migration
 * CreateCommitAheadRefusal): the transaction then aborts, the COMMIT behind it ends it as a rollback, and
 * TransactionRunner runs the work again at once, the caller now choosing the ordinary path.
 */

/** The SQLSTATE `runplane_refuse_commit_ahead(reason)` raises (class RP: runplane's own). */
export const COMMIT_AHEAD_REFUSED = 'RP001';

export function isCommitAheadRefused(err: unknown): boolean {
  return err instanceof QueryFailedError && (err.driverError as { code?: unknown }).code === COMMIT_AHEAD_REFUSED;
}

/** COMMITs queued ahead, by the transaction's query runner; the client's mark refuses statements queued after it. */
const queued = new WeakMap<QueryRunner, Promise<unknown>>();
const committed = new WeakSet<PoolClient>();

/** Queues COMMIT on the transaction's connection behind what is queued there (preparedQuery's `commitAfter`). */
export function queueCommit(runner: QueryRunner, client: PoolClient): void {
  const commit = client.query('COMMIT');
  commit.catch(() => undefined); // awaited by TransactionRunner; this only keeps it from counting as unhandled
  queued.set(runner, commit);
  committed.add(client);
}

/** The COMMIT queued ahead on `runner`'s transaction, if any. */
export function commitQueued(runner: QueryRunner): Promise<unknown> | undefined {
  return queued.get(runner);
}

/** Whether the transaction on `client` has its COMMIT queued: any later statement would run outside it. */
export function isCommitQueued(client: PoolClient): boolean {
  return committed.has(client);
}

/** Ends the mark once the transaction is over (before the connection goes back to the pool). */
export function clearCommitQueued(runner: QueryRunner, client: PoolClient | undefined): void {
  queued.delete(runner);
  if (client) committed.delete(client);
}
