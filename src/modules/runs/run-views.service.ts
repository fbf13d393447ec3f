import { Injectable } from '@nestjs/common';
import { UUID_PATTERN } from '../../common/validation/params';
import { EntityManager } from 'typeorm';
import { Principal } from '../../common/auth/principal';
import { FromReplica } from '../../infra/database/read-replica';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { DomainError } from '../../common/errors/domain-error';
import { withRawJson } from '../../common/json/raw-json';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import { BillingService } from '../billing/billing.service';
import { CostReport } from '../billing/dto/billing.dto';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import type { Cancellation } from '../lifecycle/outcomes';
import { JobView, SubmissionData, SubmissionView } from '../jobs/dto/job-spec';
import { JobsService } from '../jobs/jobs.service';
import { ProjectsService } from '../projects/projects.service';
import { UsersService } from '../users/users.service';
import { RUN_STATUSES } from './dto/run-status';
import {
  DEFAULT_LIST_JOBS_LIMIT,
  DEFAULT_LIST_SUBMISSION_DATA,
  DEFAULT_RUN_JOBS_LIMIT,
  DEFAULT_RUN_SUBMISSION_DATA,
  JobCounts,
  RunGetQueryDto,
  RunListQueryDto,
  RunView,
} from './dto/run-view.dto';
import { deriveJobCounts } from './job-counts';
import { Run } from './entities/run.entity';
import { RunsRepository } from './runs.repository';
import { RunStatusService } from './run-status.service';
import { RunAccessService } from './run-access.service';
import { required } from '../../common/required';

/** Runs as the API shows them: one run, the runs list, their job counts, jobs and costs. */
@Injectable()
export class RunViewsService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly runs: RunsRepository,
    private readonly access: RunAccessService,
    private readonly projects: ProjectsService,
    private readonly users: UsersService,
    private readonly groups: JobGroupViewsService,
    private readonly jobs: JobsService,
    private readonly billing: BillingService,
    private readonly status: RunStatusService,
  ) {}

  /**
   * One run: its first `jobs_limit` jobs (default 1,000), each with its newest `job_submissions_limit` submissions,
   * their documents as `submission_data` asks (default all: this is the detailed view).
   */
  async get(principal: Principal, projectName: string, runId: string, q: RunGetQueryDto = {}): Promise<RunView> {
    await this.status.settled([runId]);
    const { access, run } = await this.access.requireRun(principal, projectName, runId);
    const user = (await this.users.namesByIds([run.userId])).get(run.userId) ?? run.userId;
    const limits: ViewLimits = {
      submissions: q.job_submissions_limit ?? null,
      jobs: q.jobs_limit ?? DEFAULT_RUN_JOBS_LIMIT,
      documents: q.submission_data ?? DEFAULT_RUN_SUBMISSION_DATA,
    };
    return withRawJson(await this.viewOf(run, access.projectName, user, limits));
  }

  /** A page of runs, their statuses as settled by this instance's commits before the request (RunStatusService). */
  async list(principal: Principal, projectName: string | undefined, q: RunListQueryDto): Promise<Page<RunView>> {
    await this.status.settled();
    return this.page(principal, projectName, q);
  }

  @FromReplica()
  private async page(
    principal: Principal,
    projectName: string | undefined,
    q: RunListQueryDto,
  ): Promise<Page<RunView>> {
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
      if (
        !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(at) ||
        Number.isNaN(Date.parse(at)) ||
        !UUID_PATTERN.test(id)
      ) {
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
    const items = await this.views(page.items, {
      submissions: q.job_submissions_limit ?? 10,
      jobs: q.include_jobs === false ? 0 : (q.jobs_limit ?? DEFAULT_LIST_JOBS_LIMIT),
      documents: q.submission_data ?? DEFAULT_LIST_SUBMISSION_DATA,
    });
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
      const jobs = await this.jobs.viewsOfRuns(ids, limits.submissions, limits.documents, limits.jobs, cancellations);
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
        required(costs.get(r.id), `the cost of run ${r.id}`),
      ),
    );
  }

  /**
   * Runs' job_counts from their root counters: one index read per run. Only a run with a cancelled group and jobs
   * on workers or pending needs more (those jobs show as cancelled but still sit in its active or pending counts):
   * then its counters, its cancellations and those jobs are read again in one snapshot, so the counts stay exact.
   */
  private async jobCounts(runIds: string[], m?: EntityManager): Promise<Map<string, JobCounts>> {
    const roots = await this.groups.rootCountersOf(runIds, m);
    const out = new Map<string, JobCounts>();
    const needy: string[] = [];
    for (const [runId, root] of roots) {
      if (root.anyCancelled && root.nProvisioning + root.nRunning + root.nPending > 0) needy.push(runId);
      else out.set(runId, deriveJobCounts(root));
    }
    if (needy.length === 0) return out;
    const corrected = async (em: EntityManager) => {
      const [again, cancellations] = await Promise.all([
        this.groups.rootCountersOf(needy, em),
        this.groups.effectiveCancellations(needy, em),
      ]);
      // Jobs on workers or pending below a cancellation count as cancelled, but for always_run ones it spared; the
      // pending ones from the counters where they can tell (JobGroupViewsService.pendingShownCancelled).
      const fromCounters = new Map<string, number>();
      const pendingRest = new Map<string, Map<number, Cancellation>>();
      for (const [runId, under] of cancellations) {
        const shown = await this.groups.pendingShownCancelled(runId, under, em);
        fromCounters.set(runId, shown.counted);
        pendingRest.set(runId, shown.rest);
      }
      const onWorkers = await this.jobs.activeInGroups(cancellations, em, pendingRest);
      for (const [runId, root] of again) {
        const cancelled = { ...onWorkers.get(runId) };
        cancelled.pending = (cancelled.pending ?? 0) + (fromCounters.get(runId) ?? 0);
        out.set(runId, deriveJobCounts(root, cancelled));
      }
    };
    await (m ? corrected(m) : this.tx.run(corrected, 'REPEATABLE READ'));
    return out;
  }

  /** A job's children (jobs depending on it), paginated, each with its latest submission and its cost so far. */
  @FromReplica()
  async dependents(
    principal: Principal,
    projectName: string,
    runId: string,
    jobId: string,
    limit: number,
    cursor?: string,
  ): Promise<Page<JobView>> {
    const { run } = await this.access.requireRun(principal, projectName, runId);
    const cancellations = (await this.groups.effectiveCancellations([run.id])).get(run.id) ?? new Map();
    const page = await this.jobs.dependents(run.id, jobId, cancellations, limit, cursor);
    await this.fillSubmissionCosts(page.items);
    return page;
  }

  /** A job's whole history, newest first, paginated, each submission with its cost so far. */
  @FromReplica()
  async history(
    principal: Principal,
    projectName: string,
    runId: string,
    jobId: string,
    limit: number,
    cursor?: string,
  ): Promise<Page<SubmissionView>> {
    const { run } = await this.access.requireRun(principal, projectName, runId);
    const page = await this.jobs.history(run.id, jobId, limit, cursor);
    await this.fillCosts(page.items);
    return page;
  }

  @FromReplica()
  async cost(principal: Principal, projectName: string, runId: string): Promise<CostReport> {
    const { run } = await this.access.requireRun(principal, projectName, runId);
    return this.billing.runCost(run.id);
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

  /** One run's view; inside a transaction (`m`) when its caller just wrote it. */
  async viewOf(run: Run, project: string, user: string, limits: ViewLimits, m?: EntityManager): Promise<RunView> {
    const cancellations = await this.groups.effectiveCancellations([run.id], m);
    const views = await this.jobs.viewsOfRuns(
      [run.id],
      limits.submissions,
      limits.documents,
      limits.jobs,
      cancellations,
      m,
    );
    const jobs = views.get(run.id) ?? NO_JOBS;
    await this.fillSubmissionCosts(jobs.jobs, m);
    const counts = (await this.jobCounts([run.id], m)).get(run.id) ?? {};
    const fresh = m ? ((await this.runs.findRunById(run.id, m)) ?? run) : run;
    const cost = required((await this.billing.runCosts([run.id], m)).get(run.id), `the cost of run ${run.id}`);
    return toRunView(fresh, project, user, counts, jobs, cost);
  }
}

/**
 * How much of each job a view shows: submissions per job (null = all, bounded), jobs per run, and which shown
 * submissions carry their documents.
 */
export interface ViewLimits {
  submissions: number | null;
  jobs: number;
  documents: SubmissionData;
}

/** A single run's view when the request says nothing (submit and its idempotent replay answer it). */
export const RUN_VIEW_DEFAULTS: ViewLimits = {
  submissions: null,
  jobs: DEFAULT_RUN_JOBS_LIMIT,
  documents: DEFAULT_RUN_SUBMISSION_DATA,
};

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
