import { Injectable, OnModuleInit } from '@nestjs/common';
import { BudgetService } from '../billing/budget.service';
import { budgetExceededEvent, groupCancelledEvent, type NewEvent, runStatusEvent } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { randomBytes } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { Principal } from '../../common/auth/principal';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { IdempotencyService } from '../../common/idempotency/idempotency.service';
import { withRawJson } from '../../common/json/raw-json';
import { BillingService } from '../billing/billing.service';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { DependenciesService } from '../jobs/dependencies.service';
import { JobsService } from '../jobs/jobs.service';
import { ProjectAccess } from '../projects/dto/project.dto';
import { ProjectsService } from '../projects/projects.service';
import { FINISHED_RUN_STATUSES } from './dto/run-status';
import { RunView } from './dto/run-view.dto';
import { MAX_JOBS_PER_REQUEST, SubmitRunDto } from './dto/submit-run.dto';
import { Run } from './entities/run.entity';
import { RunsRepository } from './runs.repository';
import { RunAccessService } from './run-access.service';
import { RunStatusService } from './run-status.service';
import { RUN_VIEW_DEFAULTS, RunViewsService } from './run-views.service';
import { required } from '../../common/required';
import { PENDING_STATUS } from '../lifecycle/vocabulary';

/**
 * What a module above runs does when a run is deleted, inside the deleting transaction (after the run is marked
 * deleted): e.g. removing the run's logs. A hook that throws rolls the deletion back.
 */
export type RunDeletedHook = (m: EntityManager, runId: string) => Promise<void>;

/** What changes a run as a whole: submit, stop, delete, and stops on the system's behalf (the budget). */
@Injectable()
export class RunCommandsService implements OnModuleInit {
  private readonly deletedHooks: RunDeletedHook[] = [];

  constructor(
    private readonly tx: TransactionRunner,
    private readonly runs: RunsRepository,
    private readonly access: RunAccessService,
    private readonly status: RunStatusService,
    private readonly views: RunViewsService,
    private readonly projects: ProjectsService,
    private readonly groups: JobGroupsService,
    private readonly jobs: JobsService,
    private readonly idempotency: IdempotencyService,
    private readonly billing: BillingService,
    private readonly budget: BudgetService,
    private readonly events: EventsService,
    private readonly dependencies: DependenciesService,
  ) {}

  onModuleInit(): void {
    this.budget.onBudgetExceeded((projectId, limit) =>
      this.stopActiveRuns(projectId, 'budget_exceeded', limit, [budgetExceededEvent(projectId)]),
    );
  }

  /**
   * Registers what must go with a deleted run (modules above runs, at start: runs never imports them). Hooks run in
   * registration order, in the deleting transaction.
   */
  onRunDeleted(hook: RunDeletedHook): void {
    this.deletedHooks.push(hook);
  }

  /** Submits a run in one transaction: the run, its group tree, its jobs with submission 0, the counters. */
  async submit(
    principal: Principal,
    projectName: string,
    body: SubmitRunDto,
    idempotencyKey?: string,
  ): Promise<RunView> {
    const access = await this.projects.requireAccess(principal, projectName);
    await this.billing.assertWithinLimit(access.projectId, access.billingLimitUsd);
    const total = body.jobs.reduce((n, j) => n + (j.replicas ?? 1), 0);
    if (total > MAX_JOBS_PER_REQUEST) {
      throw new DomainError(
        'VALIDATION_FAILED',
        `jobs expand to ${total} jobs with replicas; at most ${MAX_JOBS_PER_REQUEST} per request`,
        [{ field: 'jobs', message: 'too many jobs' }],
      );
    }
    const refs = new Set((body.job_groups ?? []).map((g) => g.ref));
    body.jobs.forEach((j, i) => {
      if (j.group_ref !== undefined && !refs.has(j.group_ref)) {
        throw new DomainError('VALIDATION_FAILED', `jobs[${i}].group_ref names unknown ref ${j.group_ref}`, [
          { field: `jobs[${i}].group_ref`, message: 'unknown ref' },
        ]);
      }
    });
    await this.billing.checkRequestedResources(body.jobs.map((j) => j.spec));
    const view = await this.tx.run(async (m) =>
      this.idempotency.once(
        m,
        {
          userId: principal.userId,
          key: idempotencyKey,
          scope: `POST /projects/${access.projectId}/runs`,
          request: body,
          kind: 'run',
        },
        {
          create: async () => {
            await this.access.assertQueueRoom(m, access, total);
            const existing = await this.dependencies.lockExistingParents(m, body.jobs);
            const run = await this.insertRun(m, access, principal, body);
            await this.events.record(m, [runStatusEvent(access.projectId, run.id, run.status, null)]);
            const { ids, ancestors } = await this.groups.createTree(
              m,
              run.id,
              { cancelAfterNFailures: body.cancel_after_n_failures },
              (body.job_groups ?? []).map((g) => ({
                ref: g.ref,
                parentRef: g.parent_ref,
                attributes: g.attributes,
                cancelAfterNFailures: g.cancel_after_n_failures,
              })),
            );
            const newJobs = this.jobs.expand(
              body.jobs.map((job) => ({
                jobGroupId:
                  job.group_ref === undefined ? 0 : required(ids.get(job.group_ref), `job group ${job.group_ref}`),
                job,
              })),
              0,
            );
            // A new run has no jobs of its own yet: every parent is a ref of this request (an id is another run's).
            const edges = this.dependencies.plan(run.id, body.jobs, newJobs, existing);
            await this.jobs.insert(m, run.id, newJobs, run.priority);
            await this.dependencies.insertEdges(m, run.id, edges);
            const perGroup = new Map<number, number>();
            const alwaysRun = new Map<number, number>();
            const pending = new Map<number, number>();
            const bump = (per: Map<number, number>, g: number) => per.set(g, (per.get(g) ?? 0) + 1);
            for (const j of newJobs) {
              bump(perGroup, j.jobGroupId);
              if (j.alwaysRun) bump(alwaysRun, j.jobGroupId);
              if (j.status === PENDING_STATUS) bump(pending, j.jobGroupId);
            }
            await this.groups.countNewJobs(m, run.id, ancestors, perGroup, alwaysRun, pending);
            return this.views.viewOf(run, access.projectName, principal.name, RUN_VIEW_DEFAULTS, m);
          },
          idOf: (created) => created.id,
          // The key is the caller's own, so the run is theirs: its current view, as a GET would show it.
          replay: async (id) => {
            const run = await this.runs.findRunById(id, m);
            if (!run) throw notFound(`run ${id}`);
            return this.views.viewOf(run, access.projectName, principal.name, RUN_VIEW_DEFAULTS, m);
          },
        },
      ),
    );
    return withRawJson(view);
  }

  private async insertRun(
    m: EntityManager,
    access: ProjectAccess,
    principal: Principal,
    body: SubmitRunDto,
  ): Promise<Run> {
    const base = {
      projectId: access.projectId,
      userId: principal.userId,
      priority: body.priority ?? 0,
      spec: body.retry ? { retry: { ...body.retry } } : {},
      attributes: body.attributes ?? {},
    };
    // A savepoint per attempt: a name collision must not abort the whole transaction.
    for (let attempt = 0; ; attempt++) {
      const runName = body.run_name ?? generatedRunName();
      try {
        return await m.transaction(async (inner) => this.runs.insertRun(inner, { ...base, runName }));
      } catch (err) {
        const unique =
          (err as { driverError?: { constraint?: string } }).driverError?.constraint === 'uq_runs_project_id_run_name';
        if (!unique) throw err;
        if (body.run_name !== undefined)
          throw new DomainError(
            'ALREADY_EXISTS',
            `run ${body.run_name} already exists in project ${access.projectName}`,
          );
        if (attempt >= 5) throw err;
      }
    }
  }

  /**
   * Stop = cancel job group 0 (reason stopped_by_user or aborted_by_user). Idempotent; a finished run is left as is.
   */
  async stop(principal: Principal, projectName: string, runId: string, abort: boolean): Promise<RunView> {
    const { run } = await this.access.requireRun(principal, projectName, runId);
    // What the run's last commits moved is recorded (with its events) before the stop's own: the feed stays causal.
    await this.status.settled([run.id]);
    await this.tx.run(async (m) => {
      const reason = abort ? 'aborted_by_user' : 'stopped_by_user';
      const stop = await this.groups.stopRoot(m, run.id, principal.name, reason);
      if (stop?.created) await this.events.record(m, [groupCancelledEvent(run.projectId, run.id, stop.cancellation)]);
      this.status.settleAfterCommit(m, run.id);
    });
    return this.views.get(principal, projectName, runId, { job_submissions_limit: 10 });
  }

  /** Soft delete of a finished run; its name becomes free again; what modules hooked in goes with it (its logs). */
  async delete(principal: Principal, projectName: string, runId: string): Promise<void> {
    await this.status.settled([runId]);
    const { run } = await this.access.requireRun(principal, projectName, runId);
    await this.tx.run(async (m) => {
      const locked = await this.runs.lockRun(m, run.id);
      if (!locked || locked.deleted) throw notFound(`run ${runId}`);
      if (!FINISHED_RUN_STATUSES.includes(locked.status)) {
        throw new DomainError(
          'RUN_NOT_FINISHED',
          `run ${run.runName} is ${locked.status}; stop it and wait for it to finish first`,
        );
      }
      await this.runs.markDeleted(m, run.id);
      for (const hook of this.deletedHooks) await hook(m, run.id);
    });
  }

  /**
   * Stops every active run of a project on the system's behalf (e.g. `budget_exceeded`); returns how many. Each stop
   * records its `group.cancelled`; `firstStopEvents` (e.g. `project.budget_exceeded`) go with the first stop made.
   */
  async stopActiveRuns(
    projectId: string,
    reason: string,
    limit: number,
    firstStopEvents: NewEvent[] = [],
  ): Promise<number> {
    const ids = await this.runs.activeRunIds(projectId, limit);
    let pending = firstStopEvents;
    for (const id of ids) {
      const created = await this.tx.run(async (m) => {
        const stop = await this.groups.stopRoot(m, id, 'system', reason);
        if (stop?.created)
          await this.events.record(m, [groupCancelledEvent(projectId, id, stop.cancellation), ...pending]);
        this.status.settleAfterCommit(m, id);
        return stop?.created ?? false;
      });
      if (created) pending = [];
    }
    return ids.length;
  }
}

const ADJECTIVES = [
  'brave',
  'calm',
  'eager',
  'fancy',
  'gentle',
  'happy',
  'jolly',
  'keen',
  'lively',
  'merry',
  'nimble',
  'proud',
  'quick',
  'sharp',
  'swift',
  'witty',
];
const NOUNS = [
  'otter',
  'falcon',
  'badger',
  'heron',
  'lynx',
  'panda',
  'raven',
  'tiger',
  'walrus',
  'yak',
  'zebra',
  'koala',
  'moose',
  'gecko',
  'bison',
  'crane',
];

function generatedRunName(): string {
  const b = randomBytes(4);
  const suffix = b.readUInt16BE(2).toString(16).padStart(4, '0');
  return `${ADJECTIVES[b[0] % ADJECTIVES.length]}-${NOUNS[b[1] % NOUNS.length]}-${suffix}`;
}
