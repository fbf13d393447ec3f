import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { required } from '../../common/required';
import { groupCancelledEvent, jobStatusEvent, type SubmissionRef } from '../events/event-types';
import { EventsService } from '../events/events.service';
import type { StatementRider } from '../../infra/database/rider';
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
   * `job.status` events for submissions, each now in its own status, as a rider on the caller's next statement (one
   * round trip less on the hot path: see StatementRider).
   */
  async jobsRider(
    m: EntityManager,
    changes: readonly { s: SubmissionRef; status: SubmissionStatus; reason: string | null }[],
  ): Promise<StatementRider | undefined> {
    const projects = await this.runs.projectsOf(
      m,
      changes.map((c) => c.s.runId),
    );
    return this.events.recordingRider(
      m,
      changes.map((c) =>
        jobStatusEvent(required(projects.get(c.s.runId), `the project of run ${c.s.runId}`), c.s, c.status, c.reason),
      ),
    );
  }

  /** The cancellations fail-fast made while counting a failure (rare: usually none). */
  async failFast(m: EntityManager, runId: string, cancellations: readonly Cancellation[]): Promise<void> {
    if (cancellations.length === 0) return;
    const projectId = await this.runs.projectOf(m, runId);
    await this.events.record(
      m,
      cancellations.map((c) => groupCancelledEvent(projectId, runId, c)),
    );
  }
}
