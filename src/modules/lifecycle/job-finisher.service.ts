import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { isCommitAheadRefused } from '../../infra/database/commit-ahead';
import { BillingService } from '../billing/billing.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { GroupCountingService } from '../job-groups/group-counting.service';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { DependencyRelease } from './dependency-release.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type { CompleteResult } from './lifecycle.types';
import { type ActiveDelta, activeDelta, addDelta, OUTCOME_OF_STATUS, stopsAlwaysRun } from './outcomes';
import type { RetryPolicy } from './retry-policy';
import { shouldRetry } from './retry-policy';
import { type FinishedStatus, isRetryableStatus, type SubmissionStatus } from './vocabulary';

/**
 * An attempt to end: its submission and job (both locked by the caller, facts as they were before), how it ended,
 * what its worker measured; `written` when the statement that locked them already wrote its final state (a final
 * outcome no retry policy concerns: see SubmissionsRepository.lockAndFinish).
 */
export interface FinishItem {
  submission: SubmissionFacts;
  job: JobFacts;
  status: SubmissionStatus;
  reason: string;
  exitStatus: number | null;
  runtimeData: Record<string, unknown> | null;
  written?: boolean;
}

/** Runs whose counting refused a commit ahead; at this many, forgotten (each then refuses once more at most). */
const MAX_REFUSED_RUNS = 10_000;

const byRun = <T extends { submission: { runId: string } }>(items: readonly T[]): [string, T[]][] => {
  const runs = new Map<string, T[]>();
  for (const i of items) runs.set(i.submission.runId, [...(runs.get(i.submission.runId) ?? []), i]);
  return [...runs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
};

/**
 * How attempts end, for every path that ends them (workers' reports, one or a batch; lapsed leases; the time
 * limit), set-based whatever their number: billing closed and each attempt's event recorded first, in one
 * statement; then each job retried under its run's policy, or its final outcome counted into its chain (run by run,
 * after its dependents are released or ended) with the run's active counts. Called inside the caller's transaction
 * with the submissions and jobs locked (LOCK_ORDER): after billing, only counter rows remain to lock. Statuses
 * follow the commit (RunStatusService's settle).
 *
 * When the caller has nothing after it in its transaction (`lastInTransaction`: a transaction of workers' reports
 * with no starts) and the items are one run's final outcomes, the counting statement is the transaction's last and
 * COMMIT goes right behind it, a round trip fewer (commit-ahead.ts: single-report completions 1.04–1.14×). It refuses
 * where jobs would stay uncounted (a level of their chain cancelled meanwhile); that run is then remembered and
 * counted the ordinary way, in the retry and after.
 */
@Injectable()
export class JobFinisher {
  private readonly refusedRuns = new Set<string>();

  constructor(
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupsService,
    private readonly counting: GroupCountingService,
    private readonly groupViews: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly runAccess: RunAccessService,
    private readonly events: LifecycleEvents,
    private readonly dependents: DependencyRelease,
    private readonly billing: BillingService,
  ) {}

  /**
   * Ends attempts (each a different submission): closes their billing (to now, or with `atLastRollup` where the last
   * heartbeat left it: a lapsed lease) with their `job.status` events, in one statement taken before any counter
   * is locked; then retries, or counts final outcomes, as the class says. Answers in the items' order.
   */
  async finishAll(
    m: EntityManager,
    items: readonly FinishItem[],
    atLastRollup = false,
    lastInTransaction = false,
  ): Promise<CompleteResult[]> {
    if (items.length === 0) return [];
    const rider = await this.events.jobsRider(
      m,
      items.map((i) => ({ s: i.submission, status: i.status, reason: i.reason })),
    );
    // Queued, not awaited: nothing below reads what billing writes, and its locks come before any below
    // (LOCK_ORDER), which a connection's statements keep by running in the order queued. On a pipelining
    // connection (data-source-options) billing's statement and the counting's then travel in one round trip.
    const closed = this.billing.closeAttempts(
      m,
      items.map((i) => i.submission.id),
      atLastRollup,
      rider,
    );
    closed.catch(() => undefined); // awaited below: this only keeps a failure from counting as unhandled meanwhile
    try {
      const answers = await this.retryOrCount(m, items, lastInTransaction);
      await closed;
      return answers;
    } catch (err) {
      // A statement queued behind a failed one fails as "transaction aborted": billing's error is the cause.
      await closed;
      throw err;
    }
  }

  /** finishAll's steps after billing: each job retried under its run's policy, or its final outcome counted. */
  private async retryOrCount(
    m: EntityManager,
    items: readonly FinishItem[],
    lastInTransaction: boolean,
  ): Promise<CompleteResult[]> {
    const policies = await this.policiesOf(
      m,
      items.filter((i) => isRetryableStatus(i.status)),
    );
    const retried = items.filter(
      (i) =>
        isRetryableStatus(i.status) &&
        shouldRetry(policies.get(i.submission.runId), i.status, i.reason, i.job.submissionCount, i.job.createdAt),
    );
    const finals = items.filter((i) => !retried.includes(i));
    await this.subs.finishAllWithJobs(
      m,
      finals
        .filter((i) => !i.written)
        .map((i) => ({
          id: i.submission.id,
          jobId: i.job.id,
          status: i.status,
          reason: i.reason,
          exitStatus: i.exitStatus,
          runtimeData: i.runtimeData,
        })),
    );
    const runs = byRun(finals);
    const ahead = lastInTransaction && retried.length === 0 && runs.length === 1 && !this.refusedRuns.has(runs[0][0]);
    for (const [runId, ofRun] of runs) await this.countFinals(m, runId, ofRun, ahead);
    const retries = new Map<FinishItem, CompleteResult['retry_submission']>();
    for (const i of retried) retries.set(i, await this.retryOrEnd(m, i));
    return items.map((i) => ({
      submission_id: i.submission.id,
      status: i.status,
      termination_reason: i.reason,
      retry_submission: retries.get(i) ?? null,
    }));
  }

  /**
   * Counts final outcomes of one run's jobs (their submission and job rows already finished, the jobs marked
   * counted): their dependents first (released or ended: their counters and the jobs' chains are locked in one
   * order), then their chains, with the run's active counts in the same statement. The rare job a cancellation
   * already counted has its flag put back.
   */
  private async countFinals(m: EntityManager, runId: string, finals: FinishItem[], ahead: boolean): Promise<void> {
    const groupIds = [...new Set(finals.map((i) => i.submission.jobGroupId))];
    const failures = finals.some((i) => OUTCOME_OF_STATUS[i.status as FinishedStatus] === 'failed');
    const parents = finals.filter((i) => i.job.hasDependents);
    const cascade =
      parents.length > 0
        ? await this.dependents.afterFinal(
            m,
            runId,
            parents.map((i) => ({ jobId: i.job.id, status: i.status })),
            groupIds,
            failures,
          )
        : { pending: {} };
    let active: ActiveDelta = cascade.pending;
    for (const i of finals) active = addDelta(active, activeDelta(i.submission.status, -1, i.submission.submissionNum));
    const { uncounted, cancellations } = await this.counting
      .countOutcomes(
        m,
        runId,
        finals.map((i) => ({
          jobGroupId: i.submission.jobGroupId,
          outcome: OUTCOME_OF_STATUS[i.status as FinishedStatus],
          alwaysRun: i.job.alwaysRun,
        })),
        active,
        ahead,
      )
      .catch((err: unknown) => {
        if (ahead && isCommitAheadRefused(err)) {
          if (this.refusedRuns.size >= MAX_REFUSED_RUNS) this.refusedRuns.clear();
          this.refusedRuns.add(runId);
        }
        throw err;
      });
    await this.subs.markUncounted(
      m,
      uncounted.map((k) => finals[k].job.id),
    );
    await this.events.failFast(m, runId, cancellations);
    this.runStatus.settleAfterCommit(m, runId, groupIds);
  }

  /**
   * A failure within the run's retry policy: the next submission is queued, unless a cancellation above the job
   * ends it instead (an always_run job is retried under anything but an abort). Locking the chain serialises the
   * retry with a concurrent cancel of any group above the job.
   */
  private async retryOrEnd(m: EntityManager, i: FinishItem): Promise<CompleteResult['retry_submission']> {
    const { submission: s, job } = i;
    await this.subs.finish(m, s, i.status, i.reason, i.exitStatus);
    if (i.runtimeData) await this.subs.setRuntimeData(m, s, i.runtimeData);
    const chain = await this.groups.lockChain(m, s.runId, s.jobGroupId);
    let retry: CompleteResult['retry_submission'] = null;
    let pending: ActiveDelta = {};
    if (chain.cancellation && !(job.alwaysRun && !(await this.abortInChain(m, s)))) {
      await this.subs.finishJob(m, job, i.status, i.reason, false);
      if (job.hasDependents)
        pending = (await this.dependents.afterFinal(m, s.runId, [{ jobId: s.jobId, status: i.status }])).pending;
    } else {
      const next = await this.subs.retry(m, job, { ...s, terminationReason: i.reason });
      retry = { id: next.id, submission_num: next.submissionNum };
      await this.events.jobs(m, [{ ...s, submissionNum: next.submissionNum }], 'submitted');
    }
    const delta = addDelta(activeDelta(s.status, -1, s.submissionNum), pending);
    await this.runStatus.moveActive(m, s.runId, addDelta(delta, { nRetrying: retry ? 1 : 0 }));
    return retry;
  }

  private async abortInChain(m: EntityManager, s: SubmissionFacts): Promise<boolean> {
    return (await this.groupViews.chainCancellations(s.runId, s.jobGroupId, m)).some(stopsAlwaysRun);
  }

  /** The retry policies of the items' runs (fixed at submission; remembered by RunAccessService). */
  private async policiesOf(
    m: EntityManager,
    items: readonly FinishItem[],
  ): Promise<Map<string, RetryPolicy | undefined>> {
    const runIds = [...new Set(items.map((i) => i.submission.runId))];
    const out = new Map<string, RetryPolicy | undefined>();
    for (const runId of runIds) out.set(runId, await this.runAccess.retryPolicy(m, runId));
    return out;
  }
}
