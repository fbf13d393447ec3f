import { Injectable } from '@nestjs/common';
import { required } from '../../common/required';
import { UUID_PATTERN } from '../../common/validation/params';
import { EntityManager } from 'typeorm';
import { Principal } from '../../common/auth/principal';
import { Env } from '../../config/env';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { ProjectAccess } from '../projects/dto/project.dto';
import { ProjectsService } from '../projects/projects.service';
import { RetryPolicy } from './dto/run-status';
import { Run } from './entities/run.entity';
import { RunsRepository } from './runs.repository';

export interface RunRef {
  access: ProjectAccess;
  run: Run;
}

/** Runs whose project is remembered (a run never changes project); past this many, the memory starts over. */
const PROJECT_OF_RUN_CACHE = 100_000;

/** Which runs a caller may see, and the facts of a run other modules need (they never read the runs table). */
@Injectable()
export class RunAccessService {
  private readonly projectOfRun = new Map<string, string>();

  constructor(
    private readonly runs: RunsRepository,
    private readonly projects: ProjectsService,
    private readonly groups: JobGroupViewsService,
    private readonly env: Env,
  ) {}

  /** A run of a project the caller can see; another project's run is a 404, like a missing one. */
  async requireRun(principal: Principal, projectName: string, runId: string): Promise<RunRef> {
    const access = await this.projects.requireAccess(principal, projectName);
    if (!UUID_PATTERN.test(runId)) throw notFound(`run ${runId}`);
    const run = await this.runs.findRun(access.projectId, runId);
    if (!run) throw notFound(`run ${runId}`);
    return { access, run };
  }

  /**
   * With RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT set, refuses work that would take the project's unfinished jobs past
   * it. Transactions adding jobs to the project take its queue lock first, so two of them can't both fit under the
   * limit; jobs finishing meanwhile only lower the count. Costs one read per unfinished run's root counters.
   */
  async assertQueueRoom(m: EntityManager, access: ProjectAccess, adding: number): Promise<void> {
    const max = this.env.RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT;
    if (max === 0) return;
    await this.runs.lockProjectQueue(m, access.projectId);
    const unfinished = await this.groups.unfinishedJobs(m, await this.runs.unfinishedRunIds(m, access.projectId));
    if (unfinished + adding > max) {
      throw new DomainError(
        'QUEUE_LIMIT_EXCEEDED',
        `project ${access.projectName} has ${unfinished} unfinished jobs and at most ${max} are allowed: ${adding} ` +
          `more would exceed it; wait for jobs to finish or stop runs`,
      );
    }
  }

  /** Who pays for a run's work (billing is handed these ids; it never reads runs). */
  ownerOf(m: EntityManager, runId: string): Promise<{ projectId: string; userId: string }> {
    return this.runs.ownerOf(m, runId);
  }

  /** Whether the run exists and is not deleted (read in the caller's transaction). */
  isLive(m: EntityManager, runId: string): Promise<boolean> {
    return this.runs.isLive(m, runId);
  }

  /** Each run's name, by id. */
  async runNames(m: EntityManager, runIds: string[]): Promise<Map<string, string>> {
    return new Map((await this.runs.runNames(m, [...new Set(runIds)])).map((r) => [r.id, r.runName]));
  }

  retryPolicy(m: EntityManager, runId: string): Promise<RetryPolicy | undefined> {
    return this.runs.retryPolicy(m, runId);
  }

  /** The project of a run (remembered: a run never moves), for the events the lifecycle records. */
  async projectOf(m: EntityManager, runId: string): Promise<string> {
    return required((await this.projectsOf(m, [runId])).get(runId), `the project of run ${runId}`);
  }

  /** The projects of runs, by run id; one statement for the ones not remembered yet. */
  async projectsOf(m: EntityManager, runIds: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const missing: string[] = [];
    for (const id of new Set(runIds)) {
      const known = this.projectOfRun.get(id);
      if (known) out.set(id, known);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    if (this.projectOfRun.size + missing.length > PROJECT_OF_RUN_CACHE) this.projectOfRun.clear();
    for (const [id, projectId] of await this.runs.projectsOf(m, missing)) {
      this.projectOfRun.set(id, projectId);
      out.set(id, projectId);
    }
    for (const id of missing) if (!out.has(id)) throw new Error(`run ${id} vanished`);
    return out;
  }

  /** When the oldest unfinished run was submitted (event retention keeps every event from then on). */
  oldestUnfinishedSubmittedAt(): Promise<Date | null> {
    return this.runs.oldestUnfinishedSubmittedAt();
  }
}
