import { Injectable } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { Principal } from '../../common/auth/principal';
import { Env } from '../../config/env';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { IdempotencyService } from '../../common/idempotency/idempotency.service';
import { withRawJson } from '../../common/json/raw-json';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import { BillingService } from '../billing/billing.service';
import { CostReport } from '../billing/dto/billing.dto';
import { groupCancelledEvent, NewEvent, runStatusEvent } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { ActiveDelta, JobGroupsService, RootChange, RootState } from '../job-groups/job-groups.service';
import { JobView, SubmissionView } from '../jobs/dto/job-spec';
import { JobsService } from '../jobs/jobs.service';
import { ProjectAccess } from '../projects/dto/project.dto';
import { ProjectsService } from '../projects/projects.service';
import { UsersService } from '../users/users.service';
import { DerivedRunStatus, deriveRunStatus, FINISHED_RUN_STATUSES, RetryPolicy, RUN_STATUSES } from './dto/run-status';
import {
  DEFAULT_LIST_JOBS_LIMIT,
  DEFAULT_RUN_JOBS_LIMIT,
  JobCounts,
  RunGetQueryDto,
  RunListQueryDto,
  RunView,
} from './dto/run-view.dto';
import { deriveJobCounts } from './job-counts';
import { MAX_JOBS_PER_REQUEST, SubmitRunDto } from './dto/submit-run.dto';
import { Run } from './entities/run.entity';
import { RunsRepository } from './runs.repository';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Runs whose project is remembered (a run never changes project); past this many, the memory starts over. */
const PROJECT_OF_RUN_CACHE = 100_000;

export interface RunRef {
  access: ProjectAccess;
  run: Run;
}

@Injectable()
export class RunsService {
  private readonly projectOfRun = new Map<string, string>();

  constructor(
    private readonly tx: TransactionRunner,
    private readonly runs: RunsRepository,
    private readonly projects: ProjectsService,
    private readonly users: UsersService,
    private readonly groups: JobGroupsService,
    private readonly jobs: JobsService,
    private readonly idempotency: IdempotencyService,
    private readonly billing: BillingService,
    private readonly events: EventsService,
    private readonly env: Env,
  ) {}

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
        `project ${access.projectName} has ${unfinished} unfinished jobs and at most ${max} are allowed: ${adding} more would exceed it; wait for jobs to finish or stop runs`,
      );
    }
  }

  /** A run of a project the caller can see; another project's run is a 404, like a missing one. */
  async requireRun(principal: Principal, projectName: string, runId: string): Promise<RunRef> {
    const access = await this.projects.requireAccess(principal, projectName);
    if (!UUID.test(runId)) throw notFound(`run ${runId}`);
    const run = await this.runs.findRun(access.projectId, runId);
    if (!run) throw notFound(`run ${runId}`);
    return { access, run };
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
            await this.assertQueueRoom(m, access, total);
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
              body.jobs.map((job) => ({ jobGroupId: job.group_ref === undefined ? 0 : ids.get(job.group_ref)!, job })),
              0,
            );
            await this.jobs.insert(m, run.id, newJobs, run.priority);
            const perGroup = new Map<number, number>();
            for (const j of newJobs) perGroup.set(j.jobGroupId, (perGroup.get(j.jobGroupId) ?? 0) + 1);
            await this.groups.countNewJobs(m, run.id, ancestors, perGroup);
            return this.view(
              run,
              access.projectName,
              principal.name,
              { submissions: null, jobs: DEFAULT_RUN_JOBS_LIMIT },
              m,
            );
          },
          idOf: (created) => created.id,
          // The key is the caller's own, so the run is theirs: its current view, as a GET would show it.
          replay: async (id) => {
            const run = await this.runs.findRunById(id, m);
            if (!run) throw notFound(`run ${id}`);
            return this.view(
              run,
              access.projectName,
              principal.name,
              { submissions: null, jobs: DEFAULT_RUN_JOBS_LIMIT },
              m,
            );
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

  /** One run: its first `jobs_limit` jobs (default 1,000), each with its newest `job_submissions_limit` submissions. */
  async get(principal: Principal, projectName: string, runId: string, q: RunGetQueryDto = {}): Promise<RunView> {
    const { access, run } = await this.requireRun(principal, projectName, runId);
    const user = (await this.users.namesByIds([run.userId])).get(run.userId) ?? run.userId;
    const limits = { submissions: q.job_submissions_limit ?? null, jobs: q.jobs_limit ?? DEFAULT_RUN_JOBS_LIMIT };
    return withRawJson(await this.view(run, access.projectName, user, limits));
  }

  /** Stop = cancel job group 0 (reason stopped_by_user or aborted_by_user). Idempotent; a finished run is left as is. */
  async stop(principal: Principal, projectName: string, runId: string, abort: boolean): Promise<RunView> {
    const { run } = await this.requireRun(principal, projectName, runId);
    await this.tx.run(async (m) => {
      const reason = abort ? 'aborted_by_user' : 'stopped_by_user';
      const stop = await this.groups.stopRoot(m, run.id, principal.name, reason);
      if (stop?.created) await this.events.record(m, [groupCancelledEvent(run.projectId, run.id, stop.cancellation)]);
      await this.refreshStatus(m, run.id);
    });
    return this.get(principal, projectName, runId, { job_submissions_limit: 10 });
  }

  /** Soft delete of a finished run; its name becomes free again. */
  async delete(principal: Principal, projectName: string, runId: string): Promise<void> {
    const { run } = await this.requireRun(principal, projectName, runId);
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
    });
  }

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
    const derived = derive(await this.groups.rootState(m, runId));
    if (!sameStatus(derived, run)) {
      await this.runs.setStatus(m, runId, derived, FINISHED_RUN_STATUSES.includes(derived.status));
      if (derived.status !== run.status) await this.recordStatus(m, runId, derived, run.projectId);
    }
  }

  /** A `run.status` event for a run's new status (a change of status_message alone is not one). */
  private async recordStatus(m: EntityManager, runId: string, s: DerivedRunStatus, projectId?: string): Promise<void> {
    const project = projectId ?? (await this.projectOf(m, runId));
    await this.events.record(m, [runStatusEvent(project, runId, s.status, s.terminationReason)]);
  }

  /** The project of a run (remembered: a run never moves), for the events the lifecycle records. */
  async projectOf(m: EntityManager, runId: string): Promise<string> {
    return (await this.projectsOf(m, [runId])).get(runId)!;
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

  /** Moves the run's active counts (jobs provisioning, running, queued as a retry) and re-derives its status. */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<void> {
    if (!d.nProvisioning && !d.nRunning && !d.nRetrying) return;
    await this.refreshStatus(m, runId, await this.groups.moveActive(m, runId, d));
  }

  /** Invariants 1 and 6 for runs: active counts match the jobs, status is what the counters derive, root = run. */
  async runMismatches(
    active: { runId: string; nProvisioning: number; nRunning: number; nRetrying: number }[],
  ): Promise<string[]> {
    const byRun = new Map(active.map((a) => [a.runId, a]));
    const runs = await this.runs.allRuns();
    const roots = await this.groups.rootCounts(runs.map((r) => r.id));
    const stops = await this.groups.effectiveCancellations(runs.map((r) => r.id));
    const out: string[] = [];
    for (const r of runs) {
      const a = byRun.get(r.id) ?? { nProvisioning: 0, nRunning: 0, nRetrying: 0 };
      const root = roots.get(r.id);
      if (!root) {
        out.push(`run ${r.id}: has no job group 0`);
        continue;
      }
      if (a.nProvisioning !== root.nProvisioning || a.nRunning !== root.nRunning || a.nRetrying !== root.nRetrying) {
        out.push(
          `run ${r.id}: active counts ${JSON.stringify([root.nProvisioning, root.nRunning, root.nRetrying])} but jobs say ${JSON.stringify([a.nProvisioning, a.nRunning, a.nRetrying])}`,
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
          `run ${r.id}: status ${r.status}/${r.statusMessage}/${r.terminationReason} but counters derive ${derived.status}/${derived.statusMessage}/${derived.terminationReason}`,
        );
      }
    }
    return out;
  }

  /** Who pays for a run's work (billing is handed these ids; it never reads runs). */
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
        await this.refreshStatus(m, id);
        return stop?.created ?? false;
      });
      if (created) pending = [];
    }
    return ids.length;
  }

  /** When the oldest unfinished run was submitted (event retention keeps every event from then on). */
  oldestUnfinishedSubmittedAt(): Promise<Date | null> {
    return this.runs.oldestUnfinishedSubmittedAt();
  }

  ownerOf(m: EntityManager, runId: string): Promise<{ projectId: string; userId: string }> {
    return this.runs.ownerOf(m, runId);
  }

  retryPolicy(m: EntityManager, runId: string): Promise<RetryPolicy | undefined> {
    return this.runs.retryPolicy(m, runId);
  }

  async list(principal: Principal, projectName: string | undefined, q: RunListQueryDto): Promise<Page<RunView>> {
    const projectIds = projectName
      ? [(await this.projects.requireAccess(principal, projectName)).projectId]
      : await this.projects.visibleProjectIds(principal);
    const statuses = q.status
      ? q.status
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : [];
    const unknown = statuses.filter((s) => !(RUN_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0)
      throw new DomainError('VALIDATION_FAILED', `status has unknown values: ${unknown.join(', ')}`, [
        { field: 'status', message: `must be among ${RUN_STATUSES.join(', ')}` },
      ]);
    let userId: string | undefined;
    if (q.user) {
      userId = (await this.users.idsByNames([q.user])).get(q.user);
      if (!userId) return { items: [], next_cursor: null };
    }
    let after: { submittedAt: string; id: string } | undefined;
    if (q.cursor) {
      const [at, id] = decodeCursor(q.cursor, ['string', 'string']) as [string, string];
      if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(at) || Number.isNaN(Date.parse(at)) || !UUID.test(id)) {
        throw new DomainError('INVALID_CURSOR', 'cursor is not a cursor of this list', [
          { field: 'cursor', message: 'is invalid' },
        ]);
      }
      after = { submittedAt: at, id };
    }
    const rows = await this.runs.listRuns({
      projectIds,
      statuses,
      userId,
      onlyActive: q.only_active ?? false,
      ascending: q.ascending ?? false,
      after,
      limit: q.limit + 1,
    });
    const page = toPage(
      rows,
      q.limit,
      (r) => [r.submittedAt.toISOString(), r.id],
      (r) => r,
    );
    const jobsLimit = q.include_jobs === false ? 0 : (q.jobs_limit ?? DEFAULT_LIST_JOBS_LIMIT);
    const items = await this.views(page.items, { submissions: q.job_submissions_limit ?? 10, jobs: jobsLimit });
    return withRawJson({ items, next_cursor: page.next_cursor });
  }

  /**
   * Views of many runs in a constant number of statements: names, cancellations, job counts, each run's first
   * `limits.jobs` jobs, their latest submissions. What is read is what is shown, whatever the runs hold.
   */
  private async views(runs: Run[], limits: ViewLimits): Promise<RunView[]> {
    if (runs.length === 0) return [];
    const ids = runs.map((r) => r.id);
    // Independent reads go out together, each on its own pool connection.
    const jobsOfRuns = async () => {
      const cancellations = limits.jobs > 0 ? await this.groups.effectiveCancellations(ids) : new Map();
      const jobs = await this.jobs.viewsOfRuns(ids, limits.submissions, limits.jobs, cancellations);
      await this.fillSubmissionCosts([...jobs.values()].flatMap((j) => j.jobs));
      return jobs;
    };
    const [projects, users, costs, counts, jobs] = await Promise.all([
      this.projects.namesByIds(runs.map((r) => r.projectId)),
      this.users.namesByIds(runs.map((r) => r.userId)),
      this.billing.runCosts(ids),
      this.jobCounts(ids),
      jobsOfRuns(),
    ]);
    return runs.map((r) =>
      toRunView(
        r,
        projects.get(r.projectId) ?? r.projectId,
        users.get(r.userId) ?? r.userId,
        counts.get(r.id) ?? {},
        jobs.get(r.id) ?? NO_JOBS,
        costs.get(r.id)!,
      ),
    );
  }

  /**
   * Runs' job_counts from their root counters: one index read per run. Only a run with a cancelled group and jobs
   * on workers needs more (those jobs show as cancelled but still sit in its active counts): then its counters, its
   * cancellations and its jobs on workers are read again in one snapshot, so the counts stay exact.
   */
  private async jobCounts(runIds: string[], m?: EntityManager): Promise<Map<string, JobCounts>> {
    const roots = await this.groups.rootCountersOf(runIds, m);
    const out = new Map<string, JobCounts>();
    const needy: string[] = [];
    for (const [runId, root] of roots) {
      if (root.anyCancelled && root.nProvisioning + root.nRunning > 0) needy.push(runId);
      else out.set(runId, deriveJobCounts(root));
    }
    if (needy.length === 0) return out;
    const corrected = async (em: EntityManager) => {
      const [again, cancellations] = await Promise.all([
        this.groups.rootCountersOf(needy, em),
        this.groups.effectiveCancellations(needy, em),
      ]);
      const onWorkers = await this.jobs.activeInGroups(
        new Map([...cancellations].map(([runId, groups]) => [runId, [...groups.keys()]])),
        em,
      );
      for (const [runId, root] of again) out.set(runId, deriveJobCounts(root, onWorkers.get(runId)));
    };
    await (m ? corrected(m) : this.tx.run(corrected, 'REPEATABLE READ'));
    return out;
  }

  /** Each shown submission's cost so far, in one statement for the whole page. */
  async fillSubmissionCosts(jobs: JobView[], m?: EntityManager): Promise<void> {
    const shown: SubmissionView[] = [];
    for (const j of jobs) {
      shown.push(...j.job_submissions);
      if (j.latest_job_submission) shown.push(j.latest_job_submission);
    }
    await this.fillCosts(shown, m);
  }

  async fillCosts(submissions: SubmissionView[], m?: EntityManager): Promise<void> {
    // Only submissions that started running are billed at all.
    const started = submissions.filter((s) => s.started_at !== null);
    if (started.length === 0) return;
    const costs = await this.billing.submissionCosts([...new Set(started.map((s) => s.id))], m);
    for (const s of started) s.cost_usd = costs.get(s.id) ?? 0;
  }

  private async view(run: Run, project: string, user: string, limits: ViewLimits, m?: EntityManager): Promise<RunView> {
    const cancellations = await this.groups.effectiveCancellations([run.id], m);
    const jobs =
      (await this.jobs.viewsOfRuns([run.id], limits.submissions, limits.jobs, cancellations, m)).get(run.id) ?? NO_JOBS;
    await this.fillSubmissionCosts(jobs.jobs, m);
    const counts = (await this.jobCounts([run.id], m)).get(run.id) ?? {};
    const fresh = m ? ((await this.runs.findRunById(run.id, m)) ?? run) : run;
    const cost = (await this.billing.runCosts([run.id], m)).get(run.id)!;
    return toRunView(fresh, project, user, counts, jobs, cost);
  }
}

const derive = (root: RootState): DerivedRunStatus => deriveRunStatus({ ...root.counts, stopReason: root.stopReason });

const sameStatus = (a: DerivedRunStatus, b: DerivedRunStatus) =>
  a.status === b.status && a.statusMessage === b.statusMessage && a.terminationReason === b.terminationReason;

/** How much of each job a view shows: submissions per job (null = all, bounded) and jobs per run. */
interface ViewLimits {
  submissions: number | null;
  jobs: number;
}

const NO_JOBS = { jobs: [], truncated: false };

function toRunView(
  r: Run,
  project: string,
  user: string,
  counts: JobCounts,
  jobs: { jobs: RunView['jobs']; truncated: boolean },
  cost: CostReport,
): RunView {
  return {
    id: r.id,
    run_name: r.runName,
    project,
    user,
    status: r.status,
    status_message: r.statusMessage,
    termination_reason: r.terminationReason,
    submitted_at: r.submittedAt.toISOString(),
    finished_at: r.finishedAt?.toISOString() ?? null,
    priority: r.priority,
    attributes: r.attributes,
    retry: r.spec.retry ?? null,
    cost: { total_usd: cost.total_usd, breakdown: cost.breakdown },
    job_group_id: 0,
    job_counts: counts,
    jobs: jobs.jobs,
    jobs_truncated: jobs.truncated,
  };
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
  return `${ADJECTIVES[b[0] % ADJECTIVES.length]}-${NOUNS[b[1] % NOUNS.length]}-${b.readUInt16BE(2).toString(16).padStart(4, '0')}`;
}
