import { Injectable } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { IdempotencyService } from '../../common/idempotency/idempotency.service';
import { BillingService } from '../billing/billing.service';
import { EventsRetentionService } from '../events/events-retention.service';
import { WorkerLifecycleService } from '../workers/worker-lifecycle.service';

export class CleanupReport {
  @ApiProperty({ type: 'integer', minimum: 0 })
  lapsed_leases_expired!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  queued_submissions_terminated!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  idempotency_keys_removed!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  shard_rows_compacted!: number;

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description: 'Past RUNPLANE_EVENTS_RETENTION_HOURS, and older than every unfinished run.',
  })
  events_removed!: number;
}

/** One bounded pass of every clean-up the background loops also run, on demand, reporting what it did. */
@Injectable()
export class MaintenanceService {
  constructor(
    private readonly lifecycle: WorkerLifecycleService,
    private readonly idempotency: IdempotencyService,
    private readonly billing: BillingService,
    private readonly eventsRetention: EventsRetentionService,
  ) {}

  async cleanup(): Promise<CleanupReport> {
    return {
      lapsed_leases_expired: await this.lifecycle.expireLapsedLeases(500),
      queued_submissions_terminated: await this.lifecycle.sweepCancelled(50, 1000),
      idempotency_keys_removed: await this.idempotency.purgeOlderThan(24 * 3600, 5000),
      shard_rows_compacted: await this.billing.compactShards(1000),
      events_removed: await this.eventsRetention.purge(10_000),
    };
  }
}
