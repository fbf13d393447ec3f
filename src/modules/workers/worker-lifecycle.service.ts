import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Env } from '../../config/env';
import type { Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BillingService } from '../billing/billing.service';
import { NewEvent, cancellationEvents, groupStatusEvents, jobStatusEvent, SubmissionRef } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { Cancellation, cancelledJobOutcome } from '../job-groups/dto/job-group.dto';
import { ActiveDelta, GroupStatusChange, JobGroupsService, JobOutcome } from '../job-groups/job-groups.service';
import {
  FinishedStatus,
  HELD_STATUSES,
  heldStatusesAllowing,
  isAllowedTransition,
  isFinished,
  SubmissionStatus,
  TRANSITIONS,
} from '../lifecycle/vocabulary';
import { JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunsService } from '../runs/runs.service';
import { ClaimDto, ClaimedSubmissionView, CompleteDto, CompleteView, HeartbeatDto, RunningDto } from './dto/worker.dto';
import { shouldRetry } from './retry-policy';

const stale = (message: string) => new DomainError('STALE_SUBMISSION', message);

/** Who reports: the worker id in the body, under the service account whose token sent it. */
interface Holder {
  workerId: string;
  userId: string;
}

const holderOf = (principal: Principal, workerId: string): Holder => ({ workerId, userId: principal.userId });

/**
 * The locked submission, if it exists and the caller's account claimed it (else 404), and the caller's worker id
 * holds it (else 409). Another account gets exactly the answer an unknown id gets, so it learns nothing about the
 * submission (not even that it exists); the claiming account's other workers get the usual stale 409.
 */
function owned(s: SubmissionFacts | null | undefined, id: string, holder: Holder): SubmissionFacts {
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

/** Only these outcomes can be retried (by the run's retry policy). */
const isRetryable = (status: SubmissionStatus) => status === 'failed' || status === 'terminated';

const OUTCOME: Record<string, JobOutcome> = {
  done: 'succeeded',
  failed: 'failed',
  terminated: 'cancelled',
  aborted: 'aborted',
};

/** The active count a submission occupies on its run (its root group's counters) while in `status`. */
function activeDelta(status: SubmissionStatus, sign: 1 | -1, submissionNum: number): ActiveDelta {
  if (status === 'provisioning') return { nProvisioning: sign };
  if (status === 'running' || status === 'terminating') return { nRunning: sign };
  if (status === 'submitted' && submissionNum > 0) return { nRetrying: sign };
  return {};
}

function addDelta(a: ActiveDelta, b: ActiveDelta): ActiveDelta {
  return {
    nProvisioning: (a.nProvisioning ?? 0) + (b.nProvisioning ?? 0),
    nRunning: (a.nRunning ?? 0) + (b.nRunning ?? 0),
    nRetrying: (a.nRetrying ?? 0) + (b.nRetrying ?? 0),
  };
}

/**
 * The worker lifecycle: claim → running → heartbeat → complete, and the lapsed-lease path. Every transition is one
 * transaction taking locks in one order: submission, job, billing, group counters (deepest first, root last), and
 * the run row only when the run's status changes.
 */
@Injectable()
export class WorkerLifecycleService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupsService,
    private readonly runs: RunsService,
    private readonly env: Env,
    private readonly billing: BillingService,
    private readonly events: EventsService,
  ) {}

  /** Hands out queued submissions that fit the capacity, best first; concurrent claimers never share one. */
  async claim(principal: Principal, body: ClaimDto): Promise<{ submissions: ClaimedSubmissionView[] }> {
    const limit = body.limit ?? 1;
    const cap = { cpu: body.capacity.cpu, memoryMib: body.capacity.memory_mib, gpu: body.capacity.gpu ?? 0 };
    const claimed = await this.tx.run(async (m) => {
      const candidates = await this.subs.lockCandidates(m, cap, limit * 4 + 8);
      const cancellations = await this.groups.effectiveCancellations([...new Set(candidates.map((c) => c.runId))], m);
      const picked: typeof candidates = [];
      const left = { ...cap };
      const deltas = new Map<string, ActiveDelta>();
      const bump = (runId: string, d: ActiveDelta) => deltas.set(runId, addDelta(deltas.get(runId) ?? {}, d));
      for (const c of candidates) {
        const cancellation = cancellations.get(c.runId)?.get(c.jobGroupId);
        if (cancellation) {
          // Queued under a cancelled group: finish it here rather than hand it out (the sweep would, later).
          const outcome = cancelledJobOutcome(cancellation);
          const done = await this.subs.terminateQueued(
            m,
            c.runId,
            [c.jobGroupId],
            outcome.status,
            outcome.terminationReason,
            candidates.length,
          );
          if (done.retries > 0) bump(c.runId, { nRetrying: -done.retries });
          continue;
        }
        if (picked.length >= limit || c.cpu > left.cpu || c.memoryMib > left.memoryMib || c.gpu > left.gpu) continue;
        picked.push(c);
        left.cpu -= c.cpu;
        left.memoryMib -= c.memoryMib;
        left.gpu -= c.gpu;
        bump(c.runId, addDelta({ nProvisioning: 1 }, activeDelta('submitted', -1, c.submissionNum)));
      }
      const rows = await this.subs.markClaimed(
        m,
        picked.map((p) => p.id),
        body.worker_id,
        principal.userId,
        this.env.RUNPLANE_LEASE_SECONDS,
      );
      for (const runId of [...deltas.keys()].sort()) await this.runs.moveActive(m, runId, deltas.get(runId)!);
      await this.recordJobs(m, rows, 'provisioning');
      return rows;
    });
    return {
      submissions: claimed.map((r) => ({
        id: r.id,
        job_id: r.jobId,
        run_id: r.runId,
        job_group_id: r.jobGroupId,
        job_num: r.jobNum,
        replica_num: r.replicaNum,
        job_name: r.jobName,
        submission_num: r.submissionNum,
        spec: r.spec,
        lease_expires_at: new Date(r.leaseExpiresAt).toISOString(),
      })),
    };
  }

  async running(
    principal: Principal,
    id: string,
    body: RunningDto,
  ): Promise<{ status: string; lease_expires_at: string | null }> {
    return this.tx.run(async (m) => {
      const locked = await this.subs.lockWithJob(m, id);
      const s = owned(locked?.submission, id, holderOf(principal, body.worker_id));
      if (s.status === 'running')
        return { status: s.status, lease_expires_at: s.leaseExpiresAt?.toISOString() ?? null };
      if (!isAllowedTransition(s.status, 'running')) throw stale(`submission ${id} is ${s.status}, not provisioning`);
      const lease = await this.subs.start(m, s, body.provisioning_data ?? null, this.env.RUNPLANE_LEASE_SECONDS);
      // Billing rows come after the submission and job, before group counters and the run (the lock order).
      const owner = await this.runs.ownerOf(m, s.runId);
      const jobGroupIds = await this.groups.selfAndAncestorIds(m, s.runId, s.jobGroupId);
      await this.billing.startAttempt(m, {
        submissionId: s.id,
        runId: s.runId,
        jobId: s.jobId,
        ...owner,
        jobGroupIds,
        cpu: s.cpu,
        memoryMib: s.memoryMib,
        gpu: s.gpu,
      });
      await this.runs.moveActive(m, s.runId, { nProvisioning: -1, nRunning: 1 });
      await this.events.record(m, [jobStatusEvent(owner.projectId, s, 'running')]);
      return { status: 'running', lease_expires_at: lease.toISOString() };
    });
  }

  /** Renews the lease; answers whether the submission's group (or an ancestor) was cancelled meanwhile. */
  async heartbeat(
    principal: Principal,
    id: string,
    body: HeartbeatDto,
  ): Promise<{ cancel_requested: boolean; lease_expires_at: string }> {
    return this.tx.run(async (m) => {
      const s = owned(await this.subs.lockSubmission(m, id), id, holderOf(principal, body.worker_id));
      if (isFinished(s.status)) throw stale(`submission ${id} is already ${s.status}`);
      const lease = await this.subs.heartbeat(m, s, body.runtime_data ?? null, this.env.RUNPLANE_LEASE_SECONDS);
      const cancellation = await this.groups.cancellationOf(s.runId, s.jobGroupId, m);
      await this.billing.accrue(m, id);
      return { cancel_requested: cancellation !== null, lease_expires_at: new Date(lease).toISOString() };
    });
  }

  /**
   * A worker's final report. Repeating it returns the same answer and changes nothing; a report for a submission
   * that is not the job's latest, or from another worker, is a 409 that changes nothing; from another service
   * account, a 404; an outcome the state machine does not allow from the submission's status, a 409
   * `TRANSITION_NOT_ALLOWED`. (The (status, reason) pair itself was checked by the DTO.)
   */
  async complete(principal: Principal, id: string, body: CompleteDto): Promise<CompleteView> {
    const exitStatus = body.exit_status ?? null;
    const holder = holderOf(principal, body.worker_id);
    return this.tx.run(async (m) => {
      // An outcome that cannot be retried (the common `done`) is locked and finished in one statement when the report
      // is current and allowed from the submission's status; a retryable one needs the run's retry policy first.
      const retryable = isRetryable(body.status);
      const from = heldStatusesAllowing(body.status, body.termination_reason);
      const current = retryable
        ? null
        : await this.subs.finishIfLatest(m, id, holder, from, body.status, body.termination_reason, exitStatus);
      if (current?.finished) {
        const s = current.submission;
        await this.billing.closeAttempt(m, s.id);
        return this.countFinal(
          m,
          s,
          current.job,
          body.status,
          body.termination_reason,
          activeDelta(s.status, -1, s.submissionNum),
        );
      }
      // Otherwise the rows are locked and unchanged: a retryable outcome, or a report repeated, stale or unknown.
      const locked = retryable ? await this.subs.lockWithJob(m, id) : current;
      const s = owned(locked?.submission, id, holder);
      const job = locked!.job;
      if (isFinished(s.status)) {
        if (s.status === body.status && s.terminationReason === body.termination_reason) return this.answer(s, job);
        throw stale(`submission ${id} already finished as ${s.status} (${s.terminationReason})`);
      }
      if (job.latestSubmissionId !== s.id) throw stale(`submission ${id} is not the latest of its job`);
      if (
        !(HELD_STATUSES as readonly string[]).includes(s.status) ||
        !isAllowedTransition(s.status, body.status, body.termination_reason)
      ) {
        throw transitionRefused(id, s.status, body.status, body.termination_reason);
      }
      // Usage up to now, closed before the group counters and the run are locked (the lock order), so billing adds
      // nothing to the time those hot rows are held.
      await this.billing.closeAttempt(m, s.id);
      return this.finishLocked(m, s, job, body.status, body.termination_reason, exitStatus);
    });
  }

  /** Lapsed leases: the worker is presumed gone, the attempt failed as `instance_unreachable` (and may retry). */
  async expireLapsedLeases(limit: number): Promise<number> {
    return this.tx.run(async (m) => {
      const lapsed = await this.subs.lockLapsed(m, limit);
      for (const s of lapsed) {
        const locked = await this.subs.lockWithJob(m, s.id);
        if (!locked || locked.job.latestSubmissionId !== s.id) continue;
        // The clock stopped at the last heartbeat (each one rolled usage up to its time): close without accruing.
        await this.billing.closeAttempt(m, s.id, true);
        await this.finishLocked(m, locked.submission, locked.job, 'failed', 'instance_unreachable', null);
      }
      return lapsed.length;
    });
  }

  /**
   * Ends running submissions past their job's `max_duration_s` as `terminated`/`max_duration_exceeded`, even when
   * their worker is silent: billed up to now, never retried (no retry event maps from that reason). The worker's
   * next report is refused as stale (409), which tells it to stop the process.
   */
  async expireOverdue(limit: number): Promise<number> {
    return this.tx.run(async (m) => {
      const overdue = await this.subs.lockOverdue(m, limit);
      for (const s of overdue) {
        const locked = await this.subs.lockWithJob(m, s.id);
        if (!locked || locked.job.latestSubmissionId !== s.id) continue;
        await this.billing.closeAttempt(m, s.id);
        await this.finishLocked(m, locked.submission, locked.job, 'terminated', 'max_duration_exceeded', null);
      }
      return overdue.length;
    });
  }

  /** Terminates, in bounded batches, queued submissions below cancellations not yet swept. */
  async sweepCancelled(maxCancellations: number, batch: number): Promise<number> {
    let total = 0;
    for (const c of await this.groups.unswept(maxCancellations)) {
      total += await this.tx.run(async (m) => {
        const ids = await this.groups.subtreeIds(c.runId, c.jobGroupId, m);
        const outcome = cancelledJobOutcome(c);
        const done = await this.subs.terminateQueued(m, c.runId, ids, outcome.status, outcome.terminationReason, batch);
        if (done.n < batch) await this.groups.markSwept(m, c.runId, c.jobGroupId);
        await this.runs.moveActive(m, c.runId, { nRetrying: -done.retries });
        return done.n;
      });
    }
    return total;
  }

  private async finishLocked(
    m: EntityManager,
    s: SubmissionFacts,
    job: JobFacts,
    status: SubmissionStatus,
    reason: string,
    exitStatus: number | null,
  ): Promise<CompleteView> {
    const delta = activeDelta(s.status, -1, s.submissionNum);
    const retryable = isRetryable(status);
    const policy = retryable ? await this.runs.retryPolicy(m, s.runId) : undefined;
    if (!retryable || !shouldRetry(policy, status, reason, job.submissionCount, job.createdAt)) {
      // The submission and job rows are written before the hot counter rows are locked.
      await this.subs.finishWithJob(m, s, status, reason, exitStatus, true);
      return this.countFinal(m, s, job, status, reason, delta);
    }
    await this.subs.finish(m, s, status, reason, exitStatus);
    // Locking the chain serialises the retry with a concurrent cancel of any group above the job.
    const chain = await this.groups.lockChain(m, s.runId, s.jobGroupId);
    let retry: CompleteView['retry_submission'] = null;
    if (chain.cancellation) {
      await this.subs.finishJob(m, job, status, reason, false);
    } else {
      const next = await this.subs.retry(m, job, { ...s, terminationReason: reason });
      retry = { id: next.id, submission_num: next.submissionNum };
    }
    await this.recordJobs(m, [s], status, reason, retry ? [{ ...s, submissionNum: retry.submission_num }] : []);
    await this.runs.refreshStatus(
      m,
      s.runId,
      await this.groups.moveActive(m, s.runId, retry ? addDelta(delta, { nRetrying: 1 }) : delta),
    );
    return { submission_id: s.id, status, termination_reason: reason, retry_submission: retry };
  }

  /**
   * Counts a job's final outcome (its submission and job rows already finished, the job marked counted) into its
   * chain; the run's active counts move in the same statement. In the rare case a cancellation already counted
   * this job, the job's flag is put back.
   */
  private async countFinal(
    m: EntityManager,
    s: SubmissionFacts,
    job: JobFacts,
    status: SubmissionStatus,
    reason: string,
    delta: ActiveDelta,
  ): Promise<CompleteView> {
    const result = await this.groups.countOutcome(m, s.runId, s.jobGroupId, OUTCOME[status], delta);
    if (!result.counted) await this.subs.finishJob(m, job, status, reason, false);
    await this.recordFinal(m, s, status, reason, result);
    await this.runs.refreshStatus(m, s.runId, result.root);
    return { submission_id: s.id, status, termination_reason: reason, retry_submission: null };
  }

  /**
   * `job.status` events for submissions (of any runs) now in `status`, in one statement; `retried` are the new
   * submissions of retried jobs (`submitted`), recorded after their failed attempts.
   */
  private async recordJobs(
    m: EntityManager,
    subs: readonly SubmissionRef[],
    status: SubmissionStatus,
    reason: string | null = null,
    retried: readonly SubmissionRef[] = [],
  ): Promise<void> {
    const projects = await this.runs.projectsOf(
      m,
      [...subs, ...retried].map((x) => x.runId),
    );
    await this.events.record(m, [
      ...subs.map((x) => jobStatusEvent(projects.get(x.runId)!, x, status, reason)),
      ...retried.map((x) => jobStatusEvent(projects.get(x.runId)!, x, 'submitted')),
    ]);
  }

  /** A job's final outcome, with what counting it changed: group statuses, fail-fast cancellations. */
  private async recordFinal(
    m: EntityManager,
    s: SubmissionFacts,
    status: SubmissionStatus,
    reason: string,
    counted: { statusChanges: GroupStatusChange[]; cancellations: Cancellation[] },
  ): Promise<void> {
    const projectId = await this.runs.projectOf(m, s.runId);
    const events: NewEvent[] = [
      jobStatusEvent(projectId, s, status, reason),
      ...groupStatusEvents(projectId, s.runId, counted.statusChanges),
      ...counted.cancellations.flatMap((c) => cancellationEvents(projectId, s.runId, c)),
    ];
    await this.events.record(m, events);
  }

  private answer(s: SubmissionFacts, job: JobFacts): CompleteView {
    const retried = job.latestSubmissionNum > s.submissionNum;
    return {
      submission_id: s.id,
      status: s.status,
      termination_reason: s.terminationReason!,
      retry_submission:
        retried && job.latestSubmissionNum === s.submissionNum + 1
          ? { id: job.latestSubmissionId, submission_num: job.latestSubmissionNum }
          : null,
    };
  }
}
