import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Env } from '../../config/env';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { required } from '../../common/required';
import { isCommitAheadRefused } from '../../infra/database/commit-ahead';
import { BillingService } from '../billing/billing.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { type FinishingReport, JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { HeartbeatsService } from './heartbeats.service';
import { type FinishItem, JobFinisher } from './job-finisher.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type { CompleteResult, Report, ReportOutcome, RunningAnswer } from './lifecycle.types';
import { shouldRetry } from './retry-policy';
import { StartedSubmissions } from './started-submissions';
import {
  FinishedStatus,
  HELD_STATUSES,
  heldStatusesAllowing,
  isAllowedTransition,
  isFinished,
  isRetryableStatus,
  SubmissionStatus,
  TRANSITIONS,
} from './vocabulary';

/** Who reports: the worker id in the body, under the service account whose token sent it. */
export interface Holder {
  workerId: string;
  userId: string;
}

/** A report with who sent it. */
export interface HeldReport {
  holder: Holder;
  report: Report;
}

export const stale = (message: string) => new DomainError('STALE_SUBMISSION', message);

/**
 * The locked submission, if it exists and the caller's account claimed it (else 404), and the caller's worker id
 * holds it (else 409). Another account gets exactly the answer an unknown id gets, so it learns nothing about the
 * submission (not even that it exists); the claiming account's other workers get the usual stale 409.
 */
export function owned<S extends Pick<SubmissionFacts, 'claimedByUserId' | 'workerId'>>(
  s: S | null | undefined,
  id: string,
  holder: Holder,
): S {
  if (!s || s.claimedByUserId !== holder.userId) throw notFound(`submission ${id}`);
  if (s.workerId !== holder.workerId) throw stale(`submission ${id} is not held by worker ${holder.workerId}`);
  return s;
}

/** A final report the state machine does not allow from the submission's status (e.g. `done` before `running`). */
function transitionRefused(id: string, from: SubmissionStatus, status: FinishedStatus, reason: string): DomainError {
  const allowed = Object.entries(TRANSITIONS[from])
    .filter(([to, reasons]) => isFinished(to as SubmissionStatus) && reasons !== true)
    .map(([to, reasons]) => `${to} (${(reasons as readonly string[]).join(', ')})`);
  const why = from === 'provisioning' ? ' (it never reported running)' : '';
  const message = `submission ${id} is ${from}${why}: it cannot end as ${status}/${reason}`;
  return new DomainError('TRANSITION_NOT_ALLOWED', message, [
    {
      field: 'status',
      message: `from ${from} a worker may report ${allowed.length > 0 ? allowed.join('; ') : 'no outcome'}`,
    },
  ]);
}

/** The answer a final report repeated gets: what was recorded, and the retry it made, if any. */
function finishedAnswer(s: SubmissionFacts, job: JobFacts): CompleteResult {
  const retried = job.latestSubmissionNum > s.submissionNum;
  return {
    submission_id: s.id,
    status: s.status,
    termination_reason: required(s.terminationReason, `the termination reason of submission ${s.id}`),
    retry_submission:
      retried && job.latestSubmissionNum === s.submissionNum + 1
        ? { id: job.latestSubmissionId, submission_num: job.latestSubmissionNum }
        : null,
  };
}

/**
 * The final reports the statement locking their submissions writes where they stand: those no retry concerns, by
 * their status or, with `judgedFinal`, every one (assumedFinishes judged failures on the run's retry policy already).
 */
function finishingOf(items: readonly HeldReport[], judgedFinal = false): FinishingReport[] {
  return items.flatMap(({ holder, report: r }) =>
    r.kind === 'complete' && (judgedFinal || !isRetryableStatus(r.body.status))
      ? [
          {
            id: r.submissionId,
            holder,
            status: r.body.status,
            reason: r.body.termination_reason,
            exitStatus: r.body.exit_status ?? null,
            runtimeData: r.body.runtime_data ?? null,
            from: heldStatusesAllowing(r.body.status, r.body.termination_reason),
          },
        ]
      : [],
  );
}

/**
 * Applies workers' reports about distinct submissions (of any workers) together in the caller's transaction,
 * set-based: one statement per step for all of them, each report judged and answered exactly as its single route
 * would. Locks in LOCK_ORDER (lock-order.ts): submissions with their jobs, billing, counters; statuses follow the
 * commit.
 *
 * Where every report is a success or cancellation of a submission this instance started (StartedSubmissions), the
 * whole transaction goes out in one round trip: billing and counting queued behind the locking statement on the facts
 * its start left, COMMIT behind them (applyAssumed).
 */
@Injectable()
export class ReportApplier {
  private readonly started = new StartedSubmissions();

  constructor(
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly runAccess: RunAccessService,
    private readonly env: Env,
    private readonly billing: BillingService,
    private readonly finisher: JobFinisher,
    private readonly events: LifecycleEvents,
    private readonly heartbeats: HeartbeatsService,
  ) {}

  /**
   * Reports for distinct submissions, in the caller's transaction: the submissions and their jobs locked in one
   * statement (final reports no retry policy concerns written by it where allowed), each report judged as its
   * route would, then the accepted ones applied set-based: heartbeats, then final reports (billing closed, outcomes
   * counted), then starts. Answers in the items' order.
   */
  async apply(m: EntityManager, items: readonly HeldReport[]): Promise<ReportOutcome[]> {
    const assumed = this.assumedFinishes(items);
    if (assumed) return this.applyAssumed(m, items, assumed);
    const reports = items.map((h) => h.report);
    // A final report ends what the start left, however it ends (failures and retries take this path): forgotten
    // now, or each would stay remembered until evicted (StartedSubmissions: ~2 KiB each).
    this.started.forget(reports.flatMap((r) => (r.kind === 'complete' ? [r.submissionId] : [])));
    // Heartbeats lock their submissions alone: a running job's row may be held FOR SHARE a while by an add-jobs
    // request naming it as a parent, and a heartbeat must not wait for that.
    // Final reports that no retry policy can concern are written by the statement that locks them, where allowed.
    const locked = await this.subs.lockAndFinish(
      m,
      reports.filter((r) => r.kind !== 'heartbeat').map((r) => r.submissionId),
      finishingOf(items),
    );
    const beating = await this.subs.lockSubmissions(
      m,
      reports.filter((r) => r.kind === 'heartbeat').map((r) => r.submissionId),
    );
    const heartbeatFacts = new Map(beating.map((s) => [s.id, s]));
    const out: ReportOutcome[] = new Array(reports.length);
    const starts: { i: number; s: SubmissionFacts; job: JobFacts; provisioningData: Record<string, unknown> | null }[] =
      [];
    const beats: { i: number; s: SubmissionFacts; runtimeData: Record<string, unknown> | null }[] = [];
    const finishes: (FinishItem & { i: number })[] = [];
    items.forEach(({ holder, report: r }, i) => {
      try {
        if (r.kind === 'heartbeat') {
          const s = owned(heartbeatFacts.get(r.submissionId), r.submissionId, holder);
          if (isFinished(s.status)) throw stale(`submission ${s.id} is already ${s.status}`);
          return void beats.push({ i, s, runtimeData: r.body.runtime_data ?? null });
        }
        const found = locked.get(r.submissionId);
        if (found?.finished && r.kind === 'complete') {
          const { status, termination_reason: reason } = r.body;
          const written = { ...found, status, reason, exitStatus: r.body.exit_status ?? null, runtimeData: null };
          return void finishes.push({ i, ...written, written: true });
        }
        const s = owned(found?.submission, r.submissionId, holder);
        const job = required(found, `submission ${r.submissionId}`).job;
        if (r.kind === 'running') {
          if (s.status === 'running') {
            this.started.remember(s, job);
            out[i] = { answer: { status: s.status, lease_expires_at: s.leaseExpiresAt?.toISOString() ?? null } };
          } else if (!isAllowedTransition(s.status, 'running'))
            throw stale(`submission ${s.id} is ${s.status}, not provisioning`);
          else starts.push({ i, s, job, provisioningData: r.body.provisioning_data ?? null });
        } else {
          const { status, termination_reason: reason } = r.body;
          if (isFinished(s.status)) {
            if (s.status === status && s.terminationReason === reason) out[i] = { answer: finishedAnswer(s, job) };
            else throw stale(`submission ${s.id} already finished as ${s.status} (${s.terminationReason})`);
          } else if (job.latestSubmissionId !== s.id) throw stale(`submission ${s.id} is not the latest of its job`);
          else if (
            !(HELD_STATUSES as readonly string[]).includes(s.status) ||
            !isAllowedTransition(s.status, status, reason)
          )
            throw transitionRefused(s.id, s.status, status, reason);
          else
            finishes.push({
              i,
              submission: s,
              job,
              status,
              reason,
              exitStatus: r.body.exit_status ?? null,
              runtimeData: r.body.runtime_data ?? null,
            });
        }
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        out[i] = { error: err };
      }
    });
    const beaten = await this.heartbeats.beat(m, beats);
    beats.forEach((b, k) => (out[b.i] = { answer: beaten[k] }));
    // With no starts after them, the finishes are this transaction's last work (JobFinisher: COMMIT ahead).
    const finished = await this.finisher.finishAll(m, finishes, false, starts.length === 0);
    finishes.forEach((f, k) => (out[f.i] = { answer: finished[k] }));
    const started = await this.start(m, starts);
    starts.forEach((st, k) => (out[st.i] = { answer: started[k] }));
    return out;
  }

  /**
   * The final reports, each as it would finish, when all of them are final outcomes (no retry to follow: a success, a
   * cancellation, or a failure the run's remembered retry policy does not retry) that their holders report from
   * `running`, of submissions this instance started whose jobs had no dependents then; else null (the ordinary
   * path). Fail-fast is the counting statement's to refuse (a failure counted on a level with fail-fast).
   */
  private assumedFinishes(items: readonly HeldReport[]): FinishItem[] | null {
    const out: FinishItem[] = [];
    for (const { holder, report: r } of items) {
      if (r.kind !== 'complete') return null;
      const { status, termination_reason: reason } = r.body;
      const known = this.started.get(r.submissionId);
      if (!known || known.job.hasDependents) return null;
      if (isRetryableStatus(status)) {
        // Judged as JobFinisher will judge it, on the same facts: a "no" stays a "no" (the time allowed only runs out).
        const retry = this.runAccess.rememberedRetryPolicy(known.submission.runId);
        if (!retry.known) return null;
        if (shouldRetry(retry.policy, status, reason, known.job.submissionCount, known.job.createdAt)) return null;
      }
      const s = known.submission;
      if (s.workerId !== holder.workerId || s.claimedByUserId !== holder.userId) return null;
      if (!isAllowedTransition(s.status, status, reason)) return null;
      out.push({
        submission: s,
        job: known.job,
        status,
        reason,
        exitStatus: r.body.exit_status ?? null,
        runtimeData: null,
        written: true,
      });
    }
    return out;
  }

  /**
   * Final reports applied on the facts their starts left (assumedFinishes), in one round trip: the statement that
   * locks and finishes them, then billing and counting queued behind it without waiting for its answer (and COMMIT
   * behind those: JobFinisher). The locking statement refuses unless each report finished as assumed (a status
   * changed meanwhile: a lapsed lease, a cancellation; a dependent added); the transaction then aborts, those
   * submissions are forgotten, and TransactionRunner runs it again the ordinary way.
   */
  private async applyAssumed(
    m: EntityManager,
    items: readonly HeldReport[],
    assumed: FinishItem[],
  ): Promise<ReportOutcome[]> {
    const ids = assumed.map((f) => f.submission.id);
    const locking = this.subs.lockAndFinish(
      m,
      ids,
      finishingOf(items, true),
      assumed.map((f) => ({ id: f.submission.id, status: f.submission.status })),
    );
    locking.catch((err: unknown) => {
      if (isCommitAheadRefused(err)) this.started.forget(ids);
    });
    let finished: CompleteResult[];
    try {
      finished = await this.finisher.finishAll(m, assumed, false, true);
    } catch (err) {
      // Statements queued behind a refusal fail as "transaction aborted": the refusal is the cause.
      await locking;
      throw err;
    }
    await locking;
    this.started.forget(ids);
    return finished.map((answer) => ({ answer }));
  }

  /**
   * Starts attempts (submissions locked, each held and provisioning): submissions and jobs `running` with fresh
   * leases, billing's clocks started with the pinned quantities, the runs' active counts moved, their events.
   */
  private async start(
    m: EntityManager,
    items: readonly { s: SubmissionFacts; job: JobFacts; provisioningData: Record<string, unknown> | null }[],
  ): Promise<RunningAnswer[]> {
    if (items.length === 0) return [];
    const started = await this.subs.startAll(
      m,
      items.map((i) => ({ id: i.s.id, jobId: i.s.jobId, provisioningData: i.provisioningData })),
      this.env.RUNPLANE_LEASE_SECONDS,
    );
    const runIds = [...new Set(items.map((i) => i.s.runId))].sort();
    const owners = await this.runAccess.ownersOf(m, runIds);
    const chains = new Map<string, number[]>();
    for (const runId of runIds) {
      const groupIds = [...new Set(items.filter((i) => i.s.runId === runId).map((i) => i.s.jobGroupId))];
      for (const [g, chain] of await this.groups.chainsOf(m, runId, groupIds)) chains.set(`${runId}/${g}`, chain);
    }
    await this.billing.startAttempts(
      m,
      items.map(({ s }) => ({
        submissionId: s.id,
        runId: s.runId,
        jobId: s.jobId,
        ...required(owners.get(s.runId), `the owner of run ${s.runId}`),
        jobGroupIds: required(chains.get(`${s.runId}/${s.jobGroupId}`), `the chain of group ${s.jobGroupId}`),
        requested: required(started.get(s.id), `the start of submission ${s.id}`).resources,
      })),
    );
    for (const runId of runIds) {
      const n = items.filter((i) => i.s.runId === runId).length;
      await this.runStatus.moveActive(m, runId, { nProvisioning: -n, nRunning: n });
    }
    await this.events.jobs(
      m,
      items.map((i) => i.s),
      'running',
    );
    for (const { s, job } of items) this.started.remember({ ...s, status: 'running' }, job);
    return items.map((i) => ({
      status: 'running',
      lease_expires_at: required(started.get(i.s.id), `the start of submission ${i.s.id}`).leaseExpiresAt.toISOString(),
    }));
  }
}
