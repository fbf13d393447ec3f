import { Injectable } from '@nestjs/common';
import { Principal } from '../../common/auth/principal';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { DomainError } from '../../common/errors/domain-error';
import { IdempotencyService } from '../../common/idempotency/idempotency.service';
import { withRawJson } from '../../common/json/raw-json';
import { Page } from '../../common/pagination/cursor';
import { CancellationView, CreateJobGroupDto, JobGroupView, toCancellationView } from './dto/job-group.dto';
import { BillingService } from '../billing/billing.service';
import { CostReport } from '../billing/dto/billing.dto';
import { JobGroupViewsService } from './job-group-views.service';
import { GroupCountingService } from './group-counting.service';
import { JobGroupsService } from './job-groups.service';
import { groupCancelledEvent, jobStatusEvent } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { JobView } from '../jobs/dto/job-spec';
import { DependenciesService } from '../jobs/dependencies.service';
import { JobsService } from '../jobs/jobs.service';
import { PENDING_STATUS } from '../lifecycle/vocabulary';
import { AddJobsDto } from './dto/job-group-requests.dto';
import { JobGroupWithCost } from './dto/job-group-with-cost.dto';
import { MAX_JOBS_PER_REQUEST } from '../runs/dto/submit-run.dto';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { RunViewsService } from '../runs/run-views.service';

export type { JobGroupWithCost };

/** The job-group routes of a run: each checks run access first, then works on the tree in one transaction. */
@Injectable()
export class JobGroupRequestsService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly runs: RunAccessService,
    private readonly runStatus: RunStatusService,
    private readonly runViews: RunViewsService,
    private readonly groups: JobGroupsService,
    private readonly counting: GroupCountingService,
    private readonly groupViews: JobGroupViewsService,
    private readonly jobs: JobsService,
    private readonly idempotency: IdempotencyService,
    private readonly billing: BillingService,
    private readonly events: EventsService,
    private readonly dependencies: DependenciesService,
  ) {}

  async create(
    principal: Principal,
    project: string,
    runId: string,
    body: CreateJobGroupDto,
    key?: string,
  ): Promise<JobGroupView> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    return this.tx.run((m) =>
      this.idempotency.once(
        m,
        { userId: principal.userId, key, scope: `POST /runs/${run.id}/job-groups`, request: body, kind: 'job_group' },
        {
          create: async () => {
            const id = await this.groups.createGroup(
              m,
              run.id,
              body.parent_id,
              body.attributes ?? {},
              body.cancel_after_n_failures ?? null,
            );
            return this.groupViews.get(run.id, id, m);
          },
          idOf: (group) => String(group.job_group_id),
          replay: (id) => this.groupViews.get(run.id, Number(id), m),
        },
      ),
    );
  }

  /** Adds up to 10,000 jobs to a group in one transaction; refused under a cancelled group. */
  async addJobs(
    principal: Principal,
    project: string,
    runId: string,
    jobGroupId: number,
    body: AddJobsDto,
    key?: string,
  ): Promise<{ jobs: JobView[] }> {
    const { run, access } = await this.runs.requireRun(principal, project, runId);
    await this.billing.assertWithinLimit(access.projectId, access.billingLimitUsd);
    body.jobs.forEach((j, i) => {
      if (j.group_ref !== undefined) {
        throw new DomainError(
          'VALIDATION_FAILED',
          `jobs[${i}].group_ref is not allowed here: jobs go to group ${jobGroupId}`,
          [{ field: `jobs[${i}].group_ref`, message: 'not allowed here' }],
        );
      }
    });
    const total = body.jobs.reduce((n, j) => n + (j.replicas ?? 1), 0);
    if (total > MAX_JOBS_PER_REQUEST)
      throw new DomainError(
        'VALIDATION_FAILED',
        `jobs expand to ${total} jobs; at most ${MAX_JOBS_PER_REQUEST} per request`,
        [{ field: 'jobs', message: 'too many jobs' }],
      );
    await this.billing.checkRequestedResources(body.jobs.map((j) => j.spec));
    // The batch is referenced by its first job_num; the same body (the key's hash matches) tells how many follow.
    const jobs = await this.tx.run((m) =>
      this.idempotency.once(
        m,
        {
          userId: principal.userId,
          key,
          scope: `POST /runs/${run.id}/job-groups/${jobGroupId}/jobs`,
          request: body,
          kind: 'jobs',
        },
        {
          create: async () => {
            await this.runs.assertQueueRoom(m, access, total);
            // Parents are job rows: locked before the group counters (the lock order).
            const existing = await this.dependencies.lockExistingParents(m, body.jobs);
            const chain = await this.groups.lockForNewJobs(m, run.id, jobGroupId);
            const first = await this.jobs.nextJobNum(m, run.id);
            const newJobs = this.jobs.expand(
              body.jobs.map((job) => ({ jobGroupId, job })),
              first,
            );
            const edges = this.dependencies.plan(run.id, body.jobs, newJobs, existing);
            await this.jobs.insert(m, run.id, newJobs, run.priority);
            await this.dependencies.insertEdges(m, run.id, edges);
            const alwaysRun = newJobs.filter((j) => j.alwaysRun && j.status !== 'terminated').length;
            const pending = newJobs.filter((j) => j.status === PENDING_STATUS).length;
            await this.groups.addJobs(m, chain, newJobs.length, alwaysRun, pending);
            // Jobs a parent's failure ended before they were added: counted as cancelled outcomes, with their events.
            const ended = newJobs.filter((j) => j.status === 'terminated');
            if (ended.length > 0)
              await this.counting.countCascaded(m, run.id, new Map([[jobGroupId, ended.length]]), []);
            await this.events.record(
              m,
              ended.map((j) =>
                jobStatusEvent(
                  run.projectId,
                  { runId: run.id, jobGroupId, jobId: j.id, submissionNum: 0 },
                  'terminated',
                  'dependency_failed',
                ),
              ),
            );
            // A complete group runs again: its group.status follows the commit.
            this.runStatus.settleAfterCommit(m, run.id, [jobGroupId]);
            return { first, jobs: await this.jobs.addedViews(m, run.id, first, first + body.jobs.length) };
          },
          idOf: (added) => String(added.first),
          replay: async (first) => ({
            first: Number(first),
            jobs: await this.jobs.addedViews(m, run.id, Number(first), Number(first) + body.jobs.length),
          }),
        },
      ),
    );
    return withRawJson({ jobs: jobs.jobs });
  }

  /** A group with its whole subtree's counts and cost (exact now, running work included). */
  async get(principal: Principal, project: string, runId: string, jobGroupId: number): Promise<JobGroupWithCost> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    return this.withCost(run.id, await this.withPendingShown(run.id, await this.groupViews.get(run.id, jobGroupId)));
  }

  /**
   * A group's view whose subtree holds pending jobs, read again with those a cancellation shows as cancelled taken
   * out of its pending count (counters, cancellations and jobs in one snapshot). Only a group with both pending jobs
   * and a cancellation in the run reads more than its counters, and the jobs themselves only below a cancellation
   * that spares always_run jobs some of which are still open (see JobGroupViewsService.pendingShownCancelled).
   */
  private async withPendingShown(runId: string, view: JobGroupView): Promise<JobGroupView> {
    if (view.counts.n_pending === 0 || !(await this.groupViews.anyCancelled(runId))) return view;
    return this.tx.run(async (m) => {
      const again = await this.groupViews.get(runId, view.job_group_id, m);
      const cancellations = (await this.groupViews.effectiveCancellations([runId], m)).get(runId) ?? new Map();
      const subtree = new Set(await this.groupViews.subtreeIds(runId, view.job_group_id, m));
      const under = new Map([...cancellations].filter(([g]) => subtree.has(g)));
      const shown = await this.groupViews.pendingShownCancelled(runId, under, m);
      again.counts.n_pending -= shown.counted + (await this.jobs.pendingShownCancelled(runId, shown.rest, m));
      return again;
    }, 'REPEATABLE READ');
  }

  async children(
    principal: Principal,
    project: string,
    runId: string,
    jobGroupId: number,
    limit: number,
    cursor?: string,
  ): Promise<Page<JobGroupWithCost>> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    const page = await this.groupViews.children(run.id, jobGroupId, limit, cursor);
    // One cost read per child (each a few index reads on the child's own aggregate rows), at most a page of them.
    const items: JobGroupWithCost[] = [];
    for (const g of page.items) items.push(await this.withCost(run.id, await this.withPendingShown(run.id, g)));
    return { items, next_cursor: page.next_cursor };
  }

  async cost(principal: Principal, project: string, runId: string, jobGroupId: number): Promise<CostReport> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    await this.groupViews.requireGroup(run.id, jobGroupId);
    return this.billing.groupCost(run.id, jobGroupId);
  }

  private async withCost(runId: string, group: JobGroupView): Promise<JobGroupWithCost> {
    const cost = await this.billing.groupCost(runId, group.job_group_id);
    return { ...group, cost: { total_usd: cost.total_usd, breakdown: cost.breakdown } };
  }

  async listJobs(
    principal: Principal,
    project: string,
    runId: string,
    jobGroupId: number,
    q: { recursive?: boolean; status?: string; limit: number; cursor?: string },
  ): Promise<Page<JobView>> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    await this.groupViews.requireGroup(run.id, jobGroupId);
    const groupIds = q.recursive
      ? jobGroupId === 0
        ? undefined
        : await this.groupViews.subtreeIds(run.id, jobGroupId)
      : [jobGroupId];
    const statuses = q.status
      ? q.status
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : [];
    const cancellations = (await this.groupViews.effectiveCancellations([run.id])).get(run.id) ?? new Map();
    const page = await this.jobs.listJobs(run.id, groupIds, statuses, cancellations, q.limit, q.cursor);
    await this.runViews.fillSubmissionCosts(page.items);
    return page;
  }

  /** Cancels a group (O(depth) writes); repeats return the first cancellation. */
  async cancel(
    principal: Principal,
    project: string,
    runId: string,
    jobGroupId: number,
    reason?: string,
  ): Promise<CancellationView> {
    const { run } = await this.runs.requireRun(principal, project, runId);
    await this.runStatus.settled([run.id]); // as a stop does (RunCommandsService.stop)
    const cancellation = await this.tx.run(async (m) => {
      const result = await this.groups.cancel(m, run.id, jobGroupId, principal.name, reason ?? 'job_group_cancelled');
      if (!result.created) return result.cancellation;
      await this.events.record(m, [groupCancelledEvent(run.projectId, run.id, result.cancellation)]);
      // Ancestors the cancellation completed announce it after the commit.
      this.runStatus.settleAfterCommit(m, run.id, [jobGroupId]);
      return result.cancellation;
    });
    return toCancellationView(cancellation);
  }
}
