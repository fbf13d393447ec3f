import { Injectable, OnModuleInit } from '@nestjs/common';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { RunAccessService } from '../runs/run-access.service';
import { EventsService } from './events.service';

/**
 * Retention of the event feed, run by the background loops and `POST /admin/v1/maintenance/cleanup`: each pass
 * removes at most `limit` events older than RUNPLANE_EVENTS_RETENTION_HOURS, never one at or after the first event
 * (its submission) of the oldest run that has not finished, so a run's whole history stays readable while it runs.
 */
@Injectable()
export class EventsRetentionService implements OnModuleInit {
  constructor(
    private readonly events: EventsService,
    private readonly runs: RunAccessService,
    private readonly loops: BackgroundLoopsService,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'events_retention', everyMs: 10_000, pass: () => this.purge(10_000) });
  }

  async purge(limit: number): Promise<number> {
    return this.events.purge(limit, await this.runs.oldestUnfinishedSubmittedAt());
  }
}
