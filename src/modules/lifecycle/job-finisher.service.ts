import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { BillingService } from '../billing/billing.service';
import type { SubmissionRef } from '../events/event-types';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { DependencyRelease } from './dependency-release.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type { CompleteResult } from './lifecycle.types';
import { type ActiveDelta, activeDelta, addDelta, OUTCOME_OF_STATUS, stopsAlwaysRun } from './outcomes';
import { shouldRetry } from './retry-policy';
import { type FinishedStatus, isRetryableStatus, type SubmissionStatus } from './vocabulary';

/**
 * How a submission's attempt ends, for every path that ends one (a worker's report, a lapsed lease, the time
 * limit): `close` first (billing, and the attempt's event), then retried under the run's policy, or the job's final
 * outcome counted into its group chain and the run's status re-derived. Called inside the caller's transaction with
 * the submission and job rows locked (LOCK_ORDER): after `close`, only the counter rows and, rarely, the run row
 * remain to lock.
 */
@Injectable()
export class JobFinisher {
  constructor(
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupsService,
    private readonly groupViews: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly runAccess: RunAccessService,
    private readonly events: LifecycleEvents,
    private readonly dependents: DependencyRelease,
    private readonly billing: BillingService,
  ) {}

  /**
   * Closes the attempt's billing and records its `job.status` event (`s` now in `status`) in that same statement:
   * one round trip, taken before the hot counter rows are locked, so the event adds nothing to the time they are
   * held. Its snapshot, which orders it in the feed (see EventsRepository.insert), is taken then, before this
   * transaction can wait for another's counter rows; events written after a counter is locked (the run's and
   * groups' status, a dependent's release) follow it.
   */
  async close(
    m: EntityManager,
    s: SubmissionRef & { id: string },
    status: SubmissionStatus,
    reason: string,
    atLastRollup = false,
  ): Promise<void> {
    await this.billing.closeAttempt(m, s.id, atLastRollup, await this.events.jobRider(m, s, status, reason));
  }

  /**
   * Ends the attempt (`close` first, `atLastRollup` as there), then retries the job or counts its final outcome.
   */
  async finishLocked(
    m: EntityManager,
    s: SubmissionFacts,
    job: JobFacts,
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
    atLastRollup = false,
  ): Promise<CompleteResult> {
    await this.close(m, s, status, reason, atLastRollup);
    const delta = activeDelta(s.status, -1, s.submissionNum);
    const retryable = isRetryableStatus(status);
    const policy = retryable ? await this.runAccess.retryPolicy(m, s.runId) : undefined;
    if (!retryable || !shouldRetry(policy, status, reason, job.submissionCount, job.createdAt)) {
      // The submission and job rows are written before the hot counter rows are locked.
      await this.subs.finishWithJob(m, s, status, reason, exitStatus, true);
      return this.countFinal(m, s, job, status, reason, delta);
    }
    await this.subs.finish(m, s, status, reason, exitStatus);
    // Locking the chain serialises the retry with a concurrent cancel of any group above the job.
    const chain = await this.groups.lockChain(m, s.runId, s.jobGroupId);
    let retry: CompleteResult['retry_submission'] = null;
    // A cancellation ends the job rather than retry it, unless it is always_run and the cancellation no abort.
    let pending: ActiveDelta = {};
    if (chain.cancellation && !(job.alwaysRun && !(await this.abortInChain(m, s)))) {
      await this.subs.finishJob(m, job, status, reason, false);
      if (job.hasDependents)
        pending = (await this.dependents.afterFinal(m, s.runId, [{ jobId: s.jobId, status }])).pending;
    } else {
      const next = await this.subs.retry(m, job, { ...s, terminationReason: reason });
      retry = { id: next.id, submission_num: next.submissionNum };
    }
    if (retry) await this.events.jobs(m, [{ ...s, submissionNum: retry.submission_num }], 'submitted');
    await this.runStatus.refreshStatus(
      m,
      s.runId,
      await this.groups.moveActive(m, s.runId, addDelta(addDelta(delta, pending), { nRetrying: retry ? 1 : 0 })),
    );
    return { submission_id: s.id, status, termination_reason: reason, retry_submission: retry };
  }

  private async abortInChain(m: EntityManager, s: SubmissionFacts): Promise<boolean> {
    return (await this.groupViews.chainCancellations(s.runId, s.jobGroupId, m)).some(stopsAlwaysRun);
  }

  /**
   * Counts a job's final outcome (its submission and job rows already finished, the job marked counted, `close`
   * done) into its chain; the run's active counts move in the same statement. In the rare case a cancellation
   * already counted this job, the job's flag is put back.
   */
  async countFinal(
    m: EntityManager,
    s: SubmissionFacts,
    job: JobFacts,
    status: SubmissionStatus,
    reason: string,
    delta: ActiveDelta,
  ): Promise<CompleteResult> {
    // Its dependents (released or ended: their events follow its own in the feed) before its own chain is counted
    // (their counters and its chain are locked in one order).
    const cascade = job.hasDependents
      ? await this.dependents.afterFinal(m, s.runId, [{ jobId: s.jobId, status }], [s.jobGroupId])
      : { counted: false, pending: {} };
    const result = await this.groups.countOutcome(
      m,
      s.runId,
      s.jobGroupId,
      OUTCOME_OF_STATUS[status as FinishedStatus],
      addDelta(delta, cascade.pending),
      job.alwaysRun,
    );
    if (!result.counted) await this.subs.finishJob(m, job, status, reason, false);
    await this.events.counted(m, s.runId, result);
    // Uncounted itself (a cancellation counted it) while its cascade counted others: the run's status is read afresh.
    await this.runStatus.refreshStatus(m, s.runId, cascade.counted && !result.counted ? undefined : result.root);
    return { submission_id: s.id, status, termination_reason: reason, retry_submission: null };
  }
}
