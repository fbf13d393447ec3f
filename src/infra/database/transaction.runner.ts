import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';
import { isRetryableConnectionLoss, markRetried } from '../../common/errors/database-unavailable';
import { MetricsService } from '../metrics/metrics.service';
import { takeAfterCommit } from './after-commit';

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
 * could apply the use case twice, so the error propagates (503, and the client decides).
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
      try {
        const result = await (isolation
          ? this.dataSource.transaction(isolation, tracked)
          : this.dataSource.transaction(tracked));
        if (manager) for (const hook of takeAfterCommit(manager)) hook();
        return result;
      } catch (err) {
        if (manager) takeAfterCommit(manager);
        const code = err instanceof QueryFailedError ? (err.driverError as { code?: string }).code : undefined;
        if (code && TRANSIENT.has(code) && attempt < MAX_ATTEMPTS) {
          this.metrics.transactionRetries.inc({ sqlstate: code });
          this.logger.debug({ code, attempt }, 'retrying transaction');
          await new Promise((r) => setTimeout(r, Math.random() * 5 * 2 ** attempt));
          continue;
        }
        if (!workReturned && connectionRetries < MAX_CONNECTION_RETRIES && isRetryableConnectionLoss(err)) {
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
}
