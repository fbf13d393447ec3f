import { Injectable } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';

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

/** One bounded pass of every clean-up the background loops run, on demand, reporting what each did. */
@Injectable()
export class MaintenanceService {
  constructor(private readonly loops: BackgroundLoopsService) {}

  async cleanup(): Promise<CleanupReport> {
    const pass = (name: string) => this.loops.loop(name).pass();
    return {
      lapsed_leases_expired: await pass('lapsed_leases'),
      queued_submissions_terminated: await pass('cancelled_sweep'),
      idempotency_keys_removed: await pass('cleanup'),
      shard_rows_compacted: await pass('billing_shards'),
      events_removed: await pass('events_retention'),
    };
  }
}
