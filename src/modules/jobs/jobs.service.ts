import { Injectable, OnModuleInit } from '@nestjs/common';
import { timeOrderedUuid } from '../../common/ids/time-ordered-uuid';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';
import { EntityManager } from 'typeorm';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import { UUID_PATTERN } from '../../common/validation/params';
import { abortOf, type Cancellation, cancelledJobOutcome, effectiveJobStatus } from '../lifecycle/outcomes';
import { PENDING_STATUS } from '../lifecycle/vocabulary';
import {
  JobRequestDto,
  JobView,
  MAX_RUN_VIEW_SUBMISSIONS,
  NewJob,
  SUBMISSION_STATUSES,
  SubmissionData,
  SubmissionStatus,
  SubmissionView,
} from './dto/job-spec';
import { DependenciesRepository } from './dependencies.repository';
import { Job } from './entities/job.entity';
import { JobSubmission } from './entities/job-submission.entity';
import { JobPagesRepository } from './job-pages.repository';
import { DirectOutcomes, JobsRepository, SubmissionState } from './jobs.repository';

export type { DirectOutcomes, SubmissionState };
import { LatestSubmissionsRepository } from './latest-submissions.repository';
import { required } from '../../common/required';

/** Cancellations by group id, for one run: what makes a job's effective status differ from its stored one. */
export type GroupCancellations = Map<number, Cancellation>;

@Injectable()
export class JobsService implements OnModuleInit {
  constructor(
    private readonly jobs: JobsRepository,
    private readonly pages: JobPagesRepository,
    private readonly latest: LatestSubmissionsRepository,
    private readonly invariants: InvariantsRegistry,
    private readonly deps: DependenciesRepository,
  ) {}

  /** Parent ids of the jobs that have parents (no statement when none has). */
  private parentsOf(jobs: Job[], m?: EntityManager): Promise<Map<string, string[]>> {
    const ids = jobs.filter((j) => j.nParents > 0).map((j) => j.id);
    return ids.length === 0 ? Promise.resolve(new Map()) : this.deps.parentsOf(ids, m);
  }

  onModuleInit(): void {
    this.invariants.register({
      name: 'job_facts',
      check: async (limit) => (await this.jobFactMismatches(limit)).map((f) => `job ${f.jobId}: ${f.problem}`),
    });
  }

  /** Numbers requested jobs in request order from `firstJobNum`, expanding replicas. */
  expand(requests: { jobGroupId: number; job: JobRequestDto }[], firstJobNum: number): NewJob[] {
    const out: NewJob[] = [];
    requests.forEach(({ jobGroupId, job }, i) => {
      const jobNum = firstJobNum + i;
      const spec = { ...job.spec, resources: { ...job.spec.resources } };
      for (let replicaNum = 0; replicaNum < (job.replicas ?? 1); replicaNum++) {
        out.push({
          id: timeOrderedUuid(),
          jobGroupId,
          jobNum,
          replicaNum,
          jobName: job.name ?? `job-${jobNum}`,
          spec,
          alwaysRun: job.always_run ?? false,
        });
      }
    });
    return out;
  }

  insert(m: EntityManager, runId: string, jobs: NewJob[], priority: number): Promise<void> {
    return this.jobs.insertJobs(m, runId, jobs, priority);
  }

  nextJobNum(m: EntityManager, runId: string): Promise<number> {
    return this.jobs.nextJobNum(m, runId);
  }

  /**
   * Job views of several runs: each run's first `jobsLimit` jobs by (job_num, replica_num), each with its newest `n`
   * submissions (null = all, up to MAX_RUN_VIEW_SUBMISSIONS) carrying the documents `documents` asks for, and
   * whether the run has more jobs than shown. Three statements for any number of runs, each reading only what it
   * returns: the job rows (limit + 1 per run, the one extra telling truncation), then one fetch of their submissions.
   */
  async viewsOfRuns(
    runIds: string[],
    n: number | null,
    documents: SubmissionData,
    jobsLimit: number,
    cancellations: Map<string, GroupCancellations>,
    m?: EntityManager,
  ): Promise<Map<string, { jobs: JobView[]; truncated: boolean }>> {
    const fetched = await this.pages.firstJobsOfRuns(runIds, jobsLimit + 1, m);
    const perRun = new Map<string, Job[]>(runIds.map((id) => [id, []]));
    for (const job of fetched) required(perRun.get(job.runId), `the jobs of run ${job.runId}`).push(job);
    const out = new Map<string, { jobs: JobView[]; truncated: boolean }>();
    const jobs: Job[] = [];
    for (const [runId, rows] of perRun) {
      out.set(runId, { jobs: [], truncated: rows.length > jobsLimit });
      jobs.push(...rows.slice(0, jobsLimit));
    }
    // The newest submission is the one the job row points at: for n = 0 (shown as latest only) and n = 1 it is read
    // by that pointer; deeper pages read down the history index from it.
    const byPointer = n === 0 || n === 1;
    const newestByJob = byPointer ? await this.latest.newestOf(jobs, documents, m) : undefined;
    const submissions = byPointer
      ? undefined
      : await this.latest.latestPerJob(
          jobs.map((j) => j.id),
          n ?? MAX_RUN_VIEW_SUBMISSIONS,
          documents,
          m,
        );
    const parents = await this.parentsOf(jobs, m);
    for (const job of jobs) {
      const pointed = newestByJob?.get(job.id);
      const subs = submissions ? (submissions.get(job.id) ?? []) : n === 1 && pointed ? [pointed] : [];
      const newest = subs.length > 0 ? subs[subs.length - 1] : undefined;
      const latest = newestByJob ? pointed : newest?.id === job.latestSubmissionId ? newest : undefined;
      required(out.get(job.runId), `the view of run ${job.runId}`).jobs.push(
        toJobView(
          job,
          subs,
          latest ?? null,
          cancellations.get(job.runId)?.get(job.jobGroupId) ?? null,
          parents.get(job.id),
        ),
      );
    }
    return out;
  }

  /**
   * Per run, its jobs on workers (provisioning, running, terminating) in the given groups, by status (bounded by what
   * runs at once), and its jobs waiting for parents (`pending`; always_run ones left out unless aborted) in the groups
   * of `pendingGroupsByRun` (default: the same groups; each such job is read).
   */
  async activeInGroups(
    groupsByRun: Map<string, Map<number, Cancellation>>,
    m?: EntityManager,
    pendingGroupsByRun: Map<string, Map<number, Cancellation>> = groupsByRun,
  ): Promise<Map<string, Partial<Record<SubmissionStatus, number>>>> {
    const flat = (byRun: Map<string, Map<number, Cancellation>>) => {
      const runIds: string[] = [];
      const groupIds: number[] = [];
      const aborts: boolean[] = [];
      for (const [runId, groups] of byRun) {
        for (const [g, c] of groups) {
          runIds.push(runId);
          groupIds.push(g);
          aborts.push(abortOf(c) !== null);
        }
      }
      return [runIds, groupIds, aborts] as const;
    };
    const out = new Map<string, Partial<Record<SubmissionStatus, number>>>();
    const [active, pending] = await Promise.all([
      this.jobs.activeInGroups(...flat(groupsByRun), m),
      this.jobs.pendingInGroups(...flat(pendingGroupsByRun), m),
    ]);
    for (const r of [...active, ...pending.map((p) => ({ ...p, status: PENDING_STATUS }))]) {
      const counts = out.get(r.runId) ?? {};
      counts[r.status as SubmissionStatus] = r.n;
      out.set(r.runId, counts);
    }
    return out;
  }

  /**
   * A run's jobs waiting for parents in the given groups under a cancellation, but for the always_run ones it spares
   * (an abort spares none): the pending jobs those groups' views show as cancelled.
   */
  async pendingShownCancelled(
    runId: string,
    cancellations: Map<number, Cancellation>,
    m?: EntityManager,
  ): Promise<number> {
    if (cancellations.size === 0) return 0;
    const groups = [...cancellations.keys()];
    const rows = await this.jobs.pendingInGroups(
      groups.map(() => runId),
      groups,
      [...cancellations.values()].map((c) => abortOf(c) !== null),
      m,
    );
    return rows.reduce((n, r) => n + r.n, 0);
  }

  /** Jobs with job_num in [fromJobNum, toJobNum): one batch added to a run, each with its latest submission. */
  async addedViews(m: EntityManager, runId: string, fromJobNum: number, toJobNum: number): Promise<JobView[]> {
    const jobs = await this.pages.jobsBetween(m, runId, fromJobNum, toJobNum);
    // Found by the number each job row points at (one index probe per job, no walk of its history).
    const newest = await this.latest.newestOf(jobs, 'newest', m);
    const parents = await this.parentsOf(jobs, m);
    return jobs.map((j) => {
      const s = newest.get(j.id) ?? null;
      return toJobView(j, s ? [s] : [], s, null, parents.get(j.id));
    });
  }

  outcomeCounts(): Promise<DirectOutcomes[]> {
    return this.jobs.outcomeCounts();
  }

  activeCounts() {
    return this.jobs.activeCounts();
  }

  jobFactMismatches(limit: number) {
    return this.jobs.jobFactMismatches(limit);
  }

  /** A submission of a run's job by number (omitted: the job's latest); 404 when there is no such job or attempt. */
  async submissionOfJob(runId: string, jobId: string, submissionNum?: number): Promise<SubmissionState> {
    if (!UUID_PATTERN.test(jobId)) throw notFound(`job ${jobId}`);
    const s = await this.jobs.submissionOfJob(runId, jobId, submissionNum ?? null);
    if (s) return s;
    if (submissionNum !== undefined && (await this.jobs.findJob(runId, jobId)))
      throw notFound(`submission ${submissionNum} of job ${jobId}`);
    throw notFound(`job ${jobId}`);
  }

  /** A submission's status now; null once it no longer exists. */
  submissionState(id: string): Promise<SubmissionState | null> {
    return this.jobs.submissionState(id);
  }

  async history(runId: string, jobId: string, limit: number, cursor?: string): Promise<Page<SubmissionView>> {
    // A malformed id names no job (and must not reach the uuid cast, a 400 without a field).
    if (!UUID_PATTERN.test(jobId) || !(await this.jobs.findJob(runId, jobId))) throw notFound(`job ${jobId}`);
    const before = cursor ? (decodeCursor(cursor, ['number'])[0] as number) : undefined;
    const rows = await this.jobs.history(jobId, before, limit + 1);
    return toPage(rows, limit, (s) => [s.submissionNum], toSubmissionView);
  }

  /** Jobs of some groups of a run by effective status, each with its latest submission. */
  async listJobs(
    runId: string,
    groupIds: number[] | undefined,
    statuses: string[],
    cancellations: GroupCancellations,
    limit: number,
    cursor?: string,
  ): Promise<Page<JobView>> {
    const unknown = statuses.filter((s) => !(SUBMISSION_STATUSES as readonly string[]).includes(s));
    if (unknown.length > 0)
      throw new DomainError('VALIDATION_FAILED', `status has unknown values: ${unknown.join(', ')}`, [
        { field: 'status', message: `must be among ${SUBMISSION_STATUSES.join(', ')}` },
      ]);
    const after = cursor ? (decodeCursor(cursor, ['number', 'number']) as [number, number]) : undefined;
    const aborted: number[] = [];
    const terminated: number[] = [];
    const abortOver: number[] = [];
    for (const [g, c] of cancellations) {
      (cancelledJobOutcome(c).status === 'aborted' ? aborted : terminated).push(g);
      if (abortOf(c)) abortOver.push(g);
    }
    const rows = await this.pages.listJobs(runId, {
      groupIds,
      statuses,
      terminatedGroups: terminated,
      abortedGroups: aborted,
      abortOverGroups: abortOver,
      after,
      limit: limit + 1,
    });
    const page = toPage(
      rows,
      limit,
      (j) => [j.jobNum, j.replicaNum],
      (j) => j,
    );
    const latest = new Map(
      (await this.jobs.submissionsByIds(page.items.map((j) => j.latestSubmissionId))).map((s) => [s.id, s]),
    );
    const parents = await this.parentsOf(page.items);
    return {
      items: page.items.map((j) => {
        const s = latest.get(j.latestSubmissionId);
        const view = s ? toSubmissionView(s) : null;
        return toJobView(j, view ? [view] : [], view, cancellations.get(j.jobGroupId) ?? null, parents.get(j.id));
      }),
      next_cursor: page.next_cursor,
    };
  }
  /** A job's children (dependents), paginated by child id, each as a job view with its latest submission. */
  async dependents(
    runId: string,
    jobId: string,
    cancellations: GroupCancellations,
    limit: number,
    cursor?: string,
  ): Promise<Page<JobView>> {
    if (!UUID_PATTERN.test(jobId) || !(await this.jobs.findJob(runId, jobId))) throw notFound(`job ${jobId}`);
    const after = cursor ? (decodeCursor(cursor, ['string'])[0] as string) : undefined;
    if (after !== undefined && !UUID_PATTERN.test(after)) throw new DomainError('INVALID_CURSOR', 'invalid cursor');
    const ids = await this.deps.childrenOf(jobId, after, limit + 1);
    const page = toPage(
      ids,
      limit,
      (r) => [r.jobId],
      (r) => r.jobId,
    );
    const jobs = await this.jobs.jobsByIds(page.items);
    const latest = new Map(
      (await this.jobs.submissionsByIds(jobs.map((j) => j.latestSubmissionId))).map((s) => [s.id, s]),
    );
    const parents = await this.parentsOf(jobs);
    return {
      items: jobs.map((j) => {
        const s = latest.get(j.latestSubmissionId);
        const view = s ? toSubmissionView(s) : null;
        return toJobView(j, view ? [view] : [], view, cancellations.get(j.jobGroupId) ?? null, parents.get(j.id));
      }),
      next_cursor: page.next_cursor,
    };
  }
}

/**
 * A job as the API shows it: its effective status (a cancellation above it wins unless its outcome was counted), its
 * shown submissions, and its newest one. When the newest is the last shown one, `latest_job_submission` leaves out
 * the documents that item carries, so each is sent once.
 */
export function toJobView(
  job: Job,
  submissions: SubmissionView[],
  latest: SubmissionView | null,
  cancellation: Cancellation | null,
  parents: string[] = [],
): JobView {
  const effective = effectiveJobStatus(job, cancellation);
  return {
    id: job.id,
    job_num: job.jobNum,
    replica_num: job.replicaNum,
    job_name: job.jobName,
    job_group_id: job.jobGroupId,
    status: effective.status,
    termination_reason: effective.terminationReason,
    cancelled_job_group_id: effective.cancelledBy?.jobGroupId ?? null,
    depends_on: parents,
    n_pending_parents: job.nPendingParents,
    always_run: job.alwaysRun,
    submission_count: job.submissionCount,
    folded_submissions: job.foldedSubmissions,
    latest_job_submission: latest && submissions.at(-1)?.id === latest.id ? withoutDocuments(latest) : latest,
    job_submissions: submissions,
  };
}

/**
 * A submission's view without provisioning_data and runtime_data (a copy: the original may be shown in full), as a
 * literal in toView's field order (latest-submissions.repository) so that it shares that view's map.
 */
function withoutDocuments(s: SubmissionView): SubmissionView {
  return {
    id: s.id,
    submission_num: s.submission_num,
    status: s.status,
    termination_reason: s.termination_reason,
    exit_status: s.exit_status,
    submitted_at: s.submitted_at,
    started_at: s.started_at,
    finished_at: s.finished_at,
    cost_usd: s.cost_usd,
  };
}

export function toSubmissionView(s: JobSubmission): SubmissionView {
  return {
    id: s.id,
    submission_num: s.submissionNum,
    status: s.status,
    termination_reason: s.terminationReason,
    exit_status: s.exitStatus,
    submitted_at: s.submittedAt.toISOString(),
    started_at: s.startedAt?.toISOString() ?? null,
    finished_at: s.finishedAt?.toISOString() ?? null,
    provisioning_data: s.provisioningData,
    runtime_data: s.runtimeData,
    cost_usd: 0,
  };
}
