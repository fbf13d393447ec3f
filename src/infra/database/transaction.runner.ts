import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import type { IsolationLevel } from 'typeorm/driver/types/IsolationLevel';
import { MetricsService } from '../metrics/metrics.service';

/** SQLSTATEs after which the whole transaction can simply run again. */
const TRANSIENT = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 6;

/**
 * One use case = one transaction. Deadlocks and serialization failures are retried here with jittered backoff,
 * so callers never see them; everything else propagates (and rolls back).
 */
@Injectable()
export class TransactionRunner {
  private readonly logger = new Logger(TransactionRunner.name);

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly metrics: MetricsService,
  ) {}

  async run<T>(work: (m: EntityManager) => Promise<T>, isolation?: IsolationLevel): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await (isolation ? this.dataSource.transaction(isolation, work) : this.dataSource.transaction(work));
      } catch (err) {
        const code = err instanceof QueryFailedError ? (err.driverError as { code?: string }).code : undefined;
        if (!code || !TRANSIENT.has(code) || attempt >= MAX_ATTEMPTS) throw err;
        this.metrics.transactionRetries.inc({ sqlstate: code });
        this.logger.debug({ code, attempt }, 'retrying transaction');
        await new Promise((r) => setTimeout(r, Math.random() * 5 * 2 ** attempt));
      }
    }
  }
}
