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

/** What never changes about a run once submitted. */
interface RunFacts {
  projectId: string;
  userId: string;
  retry: RetryPolicy | undefined;
}

export interface RunRef {
  access: ProjectAccess;
  run: Run;
}

/** Runs whose fixed facts are remembered (they never change); past this many, the memory starts over. */
const RUN_FACTS_CACHE = 100_000;

/** Which runs a caller may see, and the facts of a run other modules need (they never read the runs table). */
@Injectable()
export class RunAccessService {
  private readonly factsOfRun = new Map<string, RunFacts>();

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

  /** Who pays for each run's work, by run id. */
  async ownersOf(
    m: EntityManager,
    runIds: readonly string[],
  ): Promise<Map<string, { projectId: string; userId: string }>> {
    return this.factsOf(m, runIds);
  }

  /** Whether the run exists and is not deleted (read in the caller's transaction). */
  isLive(m: EntityManager, runId: string): Promise<boolean> {
    return this.runs.isLive(m, runId);
  }

  /** Each run's name, by id. */
  async runNames(m: EntityManager, runIds: string[]): Promise<Map<string, string>> {
    return new Map((await this.runs.runNames(m, [...new Set(runIds)])).map((r) => [r.id, r.runName]));
  }

  async retryPolicy(m: EntityManager, runId: string): Promise<RetryPolicy | undefined> {
    return required((await this.factsOf(m, [runId])).get(runId), `run ${runId}`).retry;
  }

  /** The run's retry policy if this process remembers the run (`known: false` otherwise), without reading. */
  rememberedRetryPolicy(runId: string): { known: boolean; policy?: RetryPolicy } {
    const facts = this.factsOfRun.get(runId);
    return facts ? { known: true, policy: facts.retry } : { known: false };
  }

  /** The project of a run, for the events the lifecycle records. */
  async projectOf(m: EntityManager, runId: string): Promise<string> {
    return required((await this.factsOf(m, [runId])).get(runId), `the project of run ${runId}`).projectId;
  }

  /** The projects of runs, by run id. */
  async projectsOf(m: EntityManager, runIds: readonly string[]): Promise<Map<string, string>> {
    return new Map([...(await this.factsOf(m, runIds))].map(([id, f]) => [id, f.projectId]));
  }

  /**
   * What never changes about runs (project, owner, retry policy), by run id: remembered, so the lifecycle reads a run
   * once per process; one statement for the runs not remembered yet.
   */
  private async factsOf(m: EntityManager, runIds: readonly string[]): Promise<Map<string, RunFacts>> {
    const out = new Map<string, RunFacts>();
    const missing: string[] = [];
    for (const id of new Set(runIds)) {
      const known = this.factsOfRun.get(id);
      if (known) out.set(id, known);
      else missing.push(id);
    }
    if (missing.length === 0) return out;
    if (this.factsOfRun.size + missing.length > RUN_FACTS_CACHE) this.factsOfRun.clear();
    for (const f of await this.runs.factsOf(m, missing)) {
      const facts = { projectId: f.projectId, userId: f.userId, retry: f.retry ?? undefined };
      this.factsOfRun.set(f.id, facts);
      out.set(f.id, facts);
    }
    for (const id of missing) if (!out.has(id)) throw new Error(`run ${id} vanished`);
    return out;
  }

  /** When the oldest unfinished run was submitted (event retention keeps every event from then on). */
  oldestUnfinishedSubmittedAt(): Promise<Date | null> {
    return this.runs.oldestUnfinishedSubmittedAt();
  }
}
