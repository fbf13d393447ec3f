import type { PoolClient } from 'pg';
import { QueryFailedError } from 'typeorm';

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

/** COMMITs queued ahead, by the transaction's connection: the mark that also refuses statements queued after it. */
const queued = new WeakMap<PoolClient, Promise<unknown>>();

/** Queues COMMIT on the transaction's connection behind what is queued there (preparedQuery's `commitAfter`). */
export function queueCommit(client: PoolClient): void {
  const commit = client.query('COMMIT');
  commit.catch(() => undefined); // awaited by TransactionRunner; this only keeps it from counting as unhandled
  queued.set(client, commit);
}

/** The COMMIT queued ahead on the transaction of `client`, if any: then any later statement would run outside it. */
export function commitQueued(client: PoolClient): Promise<unknown> | undefined {
  return queued.get(client);
}

/** Ends the mark once the transaction is over (before the connection goes back to the pool). */
export function clearCommitQueued(client: PoolClient): void {
  queued.delete(client);
}
