import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { PoolClient } from 'pg';
import { DataSource, EntityManager, QueryFailedError, type QueryRunner } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';
import { isRetryableConnectionLoss, markRetried } from '../../common/errors/database-unavailable';
import { MetricsService } from '../metrics/metrics.service';
import { takeAfterCommit } from './after-commit';
import { clearCommitQueued, COMMIT_AHEAD_REFUSED, commitQueued } from './commit-ahead';

/** SQLSTATEs after which the whole transaction can simply run again. */
const TRANSIENT = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 6;
/** A lost connection is retried once, on a new one: a second loss in a row means the database is away. */
const MAX_CONNECTION_RETRIES = 1;

/**
 * One use case = one transaction. Deadlocks and serialization failures are retried here with jittered backoff,
 * so callers never see them; everything else propagates (and rolls back).
 *
 * A transaction whose connection died is retried once too, but only when it died before COMMIT was sent: until the
 * work function has returned, TypeORM has not sent COMMIT, and a session that ends without COMMIT has changed
 * nothing. Once the work has returned, a failure may have hit COMMIT after the server applied it; retrying then
 * could apply the use case twice, so the error propagates (503, and the client decides). So once the work has queued
 * its COMMIT ahead (commit-ahead.ts). A refused commit-ahead (COMMIT_AHEAD_REFUSED: nothing applied) runs the work
 * again at once; the work knows to take its ordinary path then.
 */
@Injectable()
export class TransactionRunner {
  private readonly logger = new Logger(TransactionRunner.name);

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly metrics: MetricsService,
  ) {}

  async run<T>(work: (m: EntityManager) => Promise<T>, isolation?: IsolationLevel): Promise<T> {
    let connectionRetries = 0;
    for (let attempt = 1; ; attempt++) {
      let workReturned = false;
      let manager: EntityManager | undefined;
      const tracked = async (m: EntityManager) => {
        manager = m;
        const result = await work(m);
        workReturned = true;
        return result;
      };
      // Whether the work queued its COMMIT ahead: then, as once it has returned, a lost connection is not retried.
      const ahead = { queued: false };
      try {
        const result = await this.transaction(tracked, isolation, ahead);
        if (manager) for (const hook of takeAfterCommit(manager)) hook();
        return result;
      } catch (err) {
        if (manager) takeAfterCommit(manager);
        const code = err instanceof QueryFailedError ? (err.driverError as { code?: string }).code : undefined;
        if (code === COMMIT_AHEAD_REFUSED && attempt < MAX_ATTEMPTS) {
          this.metrics.transactionRetries.inc({ sqlstate: code });
          continue;
        }
        if (code && TRANSIENT.has(code) && attempt < MAX_ATTEMPTS) {
          this.metrics.transactionRetries.inc({ sqlstate: code });
          this.logger.debug({ code, attempt }, 'retrying transaction');
          await new Promise((r) => setTimeout(r, Math.random() * 5 * 2 ** attempt));
          continue;
        }
        const commitSent = workReturned || ahead.queued;
        if (!commitSent && connectionRetries < MAX_CONNECTION_RETRIES && isRetryableConnectionLoss(err)) {
          connectionRetries++;
          this.metrics.transactionRetries.inc({ sqlstate: code ?? 'connection' });
          this.logger.warn(
            { err, attempt },
            'connection lost before COMMIT; retrying the transaction on a new connection',
          );
          await new Promise((r) => setTimeout(r, 20 + Math.random() * 30));
          continue;
        }
        if (isRetryableConnectionLoss(err)) markRetried(err);
        throw err;
      }
    }
  }

  /**
   * What `DataSource.transaction` does, less one wait: BEGIN goes to the connection's queue and the work's first
   * statement follows it at once, rather than after BEGIN's answer has come back and the event loop has got round to
   * it (a busy server's loop answered a socket 0.45–1.6 ms late; single-report completions ran 5–6 % faster, 17 of 24
   * alternated rounds). pg sends a client's queries one at a time, in the order they were queued, so BEGIN still
   * runs first. TypeORM is told the transaction is open, so a nested `m.transaction` takes a savepoint as it would in
   * one TypeORM started.
   */
  private async transaction<T>(
    work: (m: EntityManager) => Promise<T>,
    isolation: IsolationLevel | undefined,
    ahead: { queued: boolean },
  ): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    try {
      const client = (await runner.connect()) as PoolClient;
      const begun = client.query(isolation ? `BEGIN ISOLATION LEVEL ${isolation}` : 'BEGIN');
      // A plain BEGIN fails only with its session, and then so does every statement queued behind it. An isolation
      // level may be refused on a live session (SERIALIZABLE on a standby), and the statements behind would then run
      // outside any transaction: those wait for BEGIN's answer.
      if (isolation) await begun;
      else begun.catch(() => undefined);
      openedOutsideTypeorm(runner);
      try {
        const result = await work(runner.manager);
        await begun;
        const commit = commitQueued(client);
        if (commit) {
          await commit;
          closedOutsideTypeorm(runner);
        } else await runner.commitTransaction();
        return result;
      } catch (err) {
        const commit = commitQueued(client);
        if (commit) {
          ahead.queued = true;
          // The transaction has ended: committed, or (a statement before the COMMIT failed) rolled back by it.
          await commit.catch(() => undefined);
          closedOutsideTypeorm(runner);
        }
        // The original error is the one to report, whatever the rollback meets (a dead connection, most likely).
        if (runner.isTransactionActive && !runner.isReleased) await runner.rollbackTransaction().catch(() => undefined);
        throw err;
      } finally {
        clearCommitQueued(client);
      }
    } finally {
      await runner.release();
    }
  }
}

/**
 * Marks a query runner's transaction open, as its own `startTransaction` would once BEGIN is answered: TypeORM then
 * commits or rolls it back, and nests savepoints in it. (`transactionDepth` is TypeORM's, protected; the
 * transaction-retry spec checks a savepoint nested in a TransactionRunner transaction.)
 */
function openedOutsideTypeorm(runner: QueryRunner): void {
  const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
  state.isTransactionActive = true;
  state.transactionDepth = 1;
}

/** Marks it closed, as its own commit would: the COMMIT queued ahead has ended it. */
function closedOutsideTypeorm(runner: QueryRunner): void {
  const state = runner as unknown as { isTransactionActive: boolean; transactionDepth: number };
  state.isTransactionActive = false;
  state.transactionDepth = 0;
}
