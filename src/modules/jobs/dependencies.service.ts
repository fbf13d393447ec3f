import { Injectable, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';
import { FINISHED_STATUSES, PENDING_STATUS, QUEUED_STATUSES } from '../lifecycle/vocabulary';
import { DependenciesRepository, type TouchedJob } from './dependencies.repository';
import { type Edges, type ExistingParent, existingParentIds, planDependencies } from './dependency-plan';
import type { JobRequestDto, NewJob } from './dto/job-spec';

export type { TouchedJob };

/**
 * Dependencies between jobs: a request's parents checked and its edges written (in the request's transaction), the
 * set-based cascade and release steps the lifecycle calls when a job reaches its final outcome, and the views.
 */
@Injectable()
export class DependenciesService implements OnModuleInit {
  constructor(
    private readonly deps: DependenciesRepository,
    private readonly invariants: InvariantsRegistry,
  ) {}

  onModuleInit(): void {
    this.invariants.register({
      name: 'dependencies',
      check: async (limit) => {
        const counts = await this.deps.pendingCountMismatches(FINISHED_STATUSES, limit);
        const order = await this.deps.claimedBeforeParents(FINISHED_STATUSES, PENDING_STATUS, limit);
        return [...counts, ...order].slice(0, limit).map((f) => `job ${f.jobId}: ${f.problem}`);
      },
    });
  }

  /**
   * Checks refs and parent names, then locks the existing jobs named as parents (FOR SHARE, before any counter row
   * is locked: the lock order puts job rows first). Throws DEPENDENCY_INVALID naming the job.
   */
  async lockExistingParents(
    m: EntityManager,
    requests: readonly JobRequestDto[],
  ): Promise<Map<string, ExistingParent>> {
    const ids = existingParentIds(requests);
    const rows = await this.deps.lockParents(m, ids);
    return new Map(rows.map((r) => [r.id, r]));
  }

  /** Resolves the request's dependencies onto its expanded jobs (their start status and pending count); the edges. */
  plan(
    runId: string,
    requests: readonly JobRequestDto[],
    jobs: NewJob[],
    existing: ReadonlyMap<string, ExistingParent>,
  ): Edges {
    return planDependencies(runId, requests, jobs, existing);
  }

  insertEdges(m: EntityManager, runId: string, edges: Edges): Promise<void> {
    if (edges.jobIds.length === 0) return Promise.resolve();
    return this.deps.insertEdges(m, runId, edges);
  }

  /** Not-yet-started descendants a failure ends (transitively, always_run ones excepted), locked in id order. */
  lockDoomed(m: EntityManager, failedIds: string[]): Promise<TouchedJob[]> {
    return this.deps.lockDoomed(m, failedIds, PENDING_STATUS);
  }

  endDoomed(m: EntityManager, ids: string[], uncountedGroups: number[]): Promise<void> {
    return this.deps.endJobs(m, ids, 'terminated', 'dependency_failed', uncountedGroups);
  }

  /**
   * Finished jobs release their children: counts drop, children whose last parent this was are queued, but for
   * `staying` (jobs about to be ended, which stay pending until then).
   */
  release(m: EntityManager, finishedIds: string[], staying: string[] = []): Promise<TouchedJob[]> {
    return this.deps.release(m, finishedIds, PENDING_STATUS, QUEUED_STATUSES[0], staying);
  }
}
