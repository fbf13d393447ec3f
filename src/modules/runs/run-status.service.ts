import { Injectable } from '@nestjs/common';
import { runStatusEvent } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { RunAccessService } from './run-access.service';
import { EntityManager } from 'typeorm';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { ActiveDelta, JobGroupsService, RootChange, RootState } from '../job-groups/job-groups.service';
import { DerivedRunStatus, deriveRunStatus, FINISHED_RUN_STATUSES } from './dto/run-status';
import { RunsRepository } from './runs.repository';

/**
 * A run's status, derived from its root group's counters and written to the run row only when it changes: the
 * lifecycle, stops, cancellations and added jobs call this in their transactions.
 */
@Injectable()
export class RunStatusService {
  constructor(
    private readonly runs: RunsRepository,
    private readonly groups: JobGroupsService,
    private readonly groupViews: JobGroupViewsService,
    private readonly access: RunAccessService,
    private readonly events: EventsService,
  ) {}

  /**
   * Re-derives the run's status after the caller changed its root (holding the root's counters row locked).
   *
   * With the change's two ends known, the run row is written only when the derived status differs between them:
   * every change to a root happens under its lock and ends here, so the run row holds the status of the state the
   * change found. That keeps the run row out of nearly every lifecycle transaction. Without them (stop, cancel,
   * jobs added, a new run: rare), the run row is locked and compared with the root as it stands.
   */
  async refreshStatus(m: EntityManager, runId: string, change?: RootChange): Promise<void> {
    if (change) {
      const before = derive(change.before);
      const after = derive(change.after);
      if (!sameStatus(before, after)) {
        await this.runs.setStatus(m, runId, after, FINISHED_RUN_STATUSES.includes(after.status));
        if (after.status !== before.status) await this.recordStatus(m, runId, after);
      }
      return;
    }
    const run = await this.runs.lockRun(m, runId);
    if (!run) throw new Error(`run ${runId} vanished`);
    const derived = derive(await this.groupViews.rootState(m, runId));
    if (!sameStatus(derived, run)) {
      await this.runs.setStatus(m, runId, derived, FINISHED_RUN_STATUSES.includes(derived.status));
      if (derived.status !== run.status) await this.recordStatus(m, runId, derived, run.projectId);
    }
  }

  /** A `run.status` event for a run's new status (a change of status_message alone is not one). */
  private async recordStatus(m: EntityManager, runId: string, s: DerivedRunStatus, projectId?: string): Promise<void> {
    const project = projectId ?? (await this.access.projectOf(m, runId));
    await this.events.record(m, [runStatusEvent(project, runId, s.status, s.terminationReason)]);
  }

  /** Moves the run's active counts (jobs provisioning, running, queued as a retry) and re-derives its status. */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<void> {
    if (!d.nProvisioning && !d.nRunning && !d.nRetrying && !d.nPending) return;
    await this.refreshStatus(m, runId, await this.groups.moveActive(m, runId, d));
  }

  /** Invariants 1 and 6 for runs: active counts match the jobs, status is what the counters derive, root = run. */
  async runMismatches(
    active: { runId: string; nProvisioning: number; nRunning: number; nRetrying: number; nPending: number }[],
  ): Promise<string[]> {
    const byRun = new Map(active.map((a) => [a.runId, a]));
    const runs = await this.runs.allRuns();
    const roots = await this.groupViews.rootCounts(runs.map((r) => r.id));
    const stops = await this.groupViews.effectiveCancellations(runs.map((r) => r.id));
    const out: string[] = [];
    for (const r of runs) {
      const a = byRun.get(r.id) ?? { nProvisioning: 0, nRunning: 0, nRetrying: 0, nPending: 0 };
      const root = roots.get(r.id);
      if (!root) {
        out.push(`run ${r.id}: has no job group 0`);
        continue;
      }
      const counted = [root.nProvisioning, root.nRunning, root.nRetrying, root.nPending];
      const actual = [a.nProvisioning, a.nRunning, a.nRetrying, a.nPending];
      if (counted.some((n, i) => n !== actual[i])) {
        out.push(
          `run ${r.id}: active and pending counts ${JSON.stringify(counted)} but jobs say ${JSON.stringify(actual)}`,
        );
      }
      const rootStop = stops.get(r.id)?.get(0);
      const derived = deriveRunStatus({
        ...root,
        ...a,
        stopReason: rootStop && rootStop.jobGroupId === 0 ? rootStop.reason : null,
      });
      if (
        derived.status !== r.status ||
        derived.statusMessage !== r.statusMessage ||
        derived.terminationReason !== r.terminationReason
      ) {
        out.push(
          `run ${r.id}: status ${r.status}/${r.statusMessage}/${r.terminationReason} but counters derive ` +
            `${derived.status}/${derived.statusMessage}/${derived.terminationReason}`,
        );
      }
    }
    return out;
  }
}

const derive = (root: RootState): DerivedRunStatus => deriveRunStatus({ ...root.counts, stopReason: root.stopReason });

const sameStatus = (a: DerivedRunStatus, b: DerivedRunStatus) =>
  a.status === b.status && a.statusMessage === b.statusMessage && a.terminationReason === b.terminationReason;
