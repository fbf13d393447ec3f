import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { required } from '../../common/required';
import {
  cancellationEvents,
  groupStatusEvents,
  jobStatusEvent,
  type NewEvent,
  type SubmissionRef,
} from '../events/event-types';
import { EventsService } from '../events/events.service';
import type { StatementRider } from '../../infra/database/rider';
import type { GroupStatusChange } from '../job-groups/job-groups.service';
import { RunAccessService } from '../runs/run-access.service';
import type { Cancellation } from './outcomes';
import type { SubmissionStatus } from './vocabulary';

/**
 * The events of the state machine's transitions, recorded in the transition's transaction (after billing, before
 * the group counters are locked where the order allows: LOCK_ORDER). Each call is one INSERT, or a rider on the
 * caller's next statement.
 */
@Injectable()
export class LifecycleEvents {
  constructor(
    private readonly events: EventsService,
    private readonly runs: RunAccessService,
  ) {}

  /** `job.status` events for submissions (of any runs) now in `status`. */
  async jobs(
    m: EntityManager,
    subs: readonly SubmissionRef[],
    status: SubmissionStatus,
    reason: string | null = null,
  ): Promise<void> {
    if (subs.length === 0) return;
    const projects = await this.runs.projectsOf(
      m,
      subs.map((x) => x.runId),
    );
    const project = (runId: string) => required(projects.get(runId), `the project of run ${runId}`);
    await this.events.record(
      m,
      subs.map((x) => jobStatusEvent(project(x.runId), x, status, reason)),
    );
  }

  /**
   * A `job.status` event for `s`, now in `status`, as a rider on the caller's next statement (one round trip less
   * on the hot path: see StatementRider).
   */
  async jobRider(
    m: EntityManager,
    s: SubmissionRef,
    status: SubmissionStatus,
    reason: string | null,
  ): Promise<StatementRider | undefined> {
    const projectId = await this.runs.projectOf(m, s.runId);
    return this.events.recordingRider(m, [jobStatusEvent(projectId, s, status, reason)]);
  }

  /** What counting a job's outcome changed: group statuses and fail-fast cancellations (rare: usually nothing). */
  async counted(
    m: EntityManager,
    runId: string,
    counted: { statusChanges: GroupStatusChange[]; cancellations: Cancellation[] },
  ): Promise<void> {
    if (counted.statusChanges.length === 0 && counted.cancellations.length === 0) return;
    const projectId = await this.runs.projectOf(m, runId);
    const events: NewEvent[] = [
      ...groupStatusEvents(projectId, runId, counted.statusChanges),
      ...counted.cancellations.flatMap((c) => cancellationEvents(projectId, runId, c)),
    ];
    await this.events.record(m, events);
  }
}
