import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { GroupCountingService } from '../job-groups/group-counting.service';
import { DependenciesService } from '../jobs/dependencies.service';
import { RunStatusService } from '../runs/run-status.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type { ActiveDelta } from './outcomes';
import type { SubmissionStatus } from './vocabulary';

/** A job of the run that has just reached its final outcome (after its retries). */
export interface FinalJob {
  jobId: string;
  status: SubmissionStatus;
}

/**
 * What a job's final outcome does to its dependents, in the finishing transaction, set-based whatever their number:
 * a parent that did not end `done` ends its not-yet-started descendants (transitively, always_run ones excepted)
 * as `terminated`/`dependency_failed`, counted and with their events; every finished job (the parent and those
 * descendants) releases its children: pending-parents counts drop, and a child whose last parent this was is
 * queued (`submitted`), with its event. The groups of the jobs that left `pending` count them out. Kept apart from
 * the finisher so the finish path stays as it is.
 */
@Injectable()
export class DependencyRelease {
  constructor(
    private readonly deps: DependenciesService,
    private readonly counting: GroupCountingService,
    private readonly events: LifecycleEvents,
    private readonly runStatus: RunStatusService,
  ) {}

  /**
   * `finished` are jobs of run `runId` now in their final status. `alsoLock` are groups whose chain the caller
   * counts right after (the parents' own), locked here in the same order when the cascade locks counters
   * (`failuresNext`: failures among them, whose fail-fast levels are then locked whole here).
   * Returns whether the cascade counted outcomes into the run's groups (the run's status may have changed), and the
   * move of the run's pending count (jobs released or ended left `pending`), for the caller's next write of the
   * run's root counters (LOCK_ORDER: the root is locked last).
   */
  async afterFinal(
    m: EntityManager,
    runId: string,
    finished: readonly FinalJob[],
    alsoLock: number[] = [],
    failuresNext = false,
  ): Promise<{ counted: boolean; pending: ActiveDelta }> {
    if (finished.length === 0) return { counted: false, pending: {} };
    const failed = finished.filter((f) => f.status !== 'done').map((f) => f.jobId);
    const doomed = await this.deps.lockDoomed(m, failed);
    if (doomed.length > 0) await this.events.jobs(m, doomed, 'terminated', 'dependency_failed');
    // Job rows before counter rows (LOCK_ORDER): the release locks the children first; the doomed stay pending for
    // the step below to end.
    const released = await this.deps.release(
      m,
      [...finished.map((f) => f.jobId), ...doomed.map((d) => d.jobId)],
      doomed.map((d) => d.jobId),
    );
    const perGroup = new Map<number, number>();
    const leftPending = new Map<number, number>();
    for (const d of doomed) perGroup.set(d.jobGroupId, (perGroup.get(d.jobGroupId) ?? 0) + 1);
    for (const j of [...doomed, ...released]) leftPending.set(j.jobGroupId, (leftPending.get(j.jobGroupId) ?? 0) + 1);
    const result = await this.counting.countCascaded(m, runId, perGroup, alsoLock, leftPending, failuresNext);
    let counted = false;
    if (doomed.length > 0) {
      await this.deps.endDoomed(
        m,
        doomed.map((d) => d.jobId),
        result.uncountedGroups,
      );
      counted = doomed.some((d) => !result.uncountedGroups.includes(d.jobGroupId));
      // The ended jobs' groups may have failed or completed: their statuses follow the commit.
      if (counted) this.runStatus.settleAfterCommit(m, runId, [...perGroup.keys()]);
    }
    await this.events.jobs(m, released, 'submitted');
    return { counted, pending: { nPending: -(doomed.length + released.length) } };
  }
}
