import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Env } from '../../config/env';
import type { Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BillingService } from '../billing/billing.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { abortOf, activeDelta, cancelledJobOutcome } from './outcomes';
import {
  FinishedStatus,
  HELD_STATUSES,
  heldStatusesAllowing,
  isAllowedTransition,
  isFinished,
  SubmissionStatus,
  TRANSITIONS,
  isRetryableStatus,
} from './vocabulary';
import { JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { JobFinisher } from './job-finisher.service';
import { LifecycleEvents } from './lifecycle-events.service';
import { SparedJobs } from './spared-jobs.service';
import type { CompleteInput, CompleteResult, HeartbeatInput, HeartbeatItem, RunningInput } from './lifecycle.types';
import { required } from '../../common/required';

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
function owned<S extends Pick<SubmissionFacts, 'claimedByUserId' | 'workerId'>>(
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

/**
 * What workers report: claim → running → heartbeat → complete. Every transition is one transaction taking its
 * locks in LOCK_ORDER (lock-order.ts): submission, job, billing, group counters (deepest first, root last), and the
 * run row only when the run's status changes.
 */
@Injectable()
export class WorkerReportsService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly runAccess: RunAccessService,
    private readonly env: Env,
    private readonly billing: BillingService,
    private readonly finisher: JobFinisher,
    private readonly events: LifecycleEvents,
    private readonly spares: SparedJobs,
  ) {}

  async running(
    principal: Principal,
    id: string,
    body: RunningInput,
  ): Promise<{ status: string; lease_expires_at: string | null }> {
    return this.tx.run(async (m) => {
      const locked = await this.subs.lockWithJob(m, id);
      const s = owned(locked?.submission, id, holderOf(principal, body.worker_id));
      if (s.status === 'running')
        return { status: s.status, lease_expires_at: s.leaseExpiresAt?.toISOString() ?? null };
      if (!isAllowedTransition(s.status, 'running')) throw stale(`submission ${id} is ${s.status}, not provisioning`);
      const started = await this.subs.start(m, s, body.provisioning_data ?? null, this.env.RUNPLANE_LEASE_SECONDS);
      // Billing rows come after the submission and job, before group counters and the run (the lock order).
      const owner = await this.runAccess.ownerOf(m, s.runId);
      const jobGroupIds = await this.groups.selfAndAncestorIds(m, s.runId, s.jobGroupId);
      await this.billing.startAttempt(m, {
        submissionId: s.id,
        runId: s.runId,
        jobId: s.jobId,
        ...owner,
        jobGroupIds,
        requested: started.resources,
      });
      await this.runStatus.moveActive(m, s.runId, { nProvisioning: -1, nRunning: 1 });
      await this.events.jobs(m, [s], 'running');
      return { status: 'running', lease_expires_at: started.leaseExpiresAt.toISOString() };
    });
  }

  /** Renews the lease; answers whether the submission's group (or an ancestor) was cancelled meanwhile. */
  async heartbeat(
    principal: Principal,
    id: string,
    body: HeartbeatInput,
  ): Promise<{ cancel_requested: boolean; lease_expires_at: string }> {
    return this.tx.run(async (m) => {
      const s = owned(await this.subs.lockSubmission(m, id), id, holderOf(principal, body.worker_id));
      if (isFinished(s.status)) throw stale(`submission ${id} is already ${s.status}`);
      const lease = await this.subs.heartbeat(m, s, body.runtime_data ?? null, this.env.RUNPLANE_LEASE_SECONDS);
      const found = await this.groups.cancellationOf(s.runId, s.jobGroupId, m);
      const cancellation = found && (await this.spares.of(m, [s])).has(s.jobId) ? null : found;
      await this.billing.accrue(m, id);
      return { cancel_requested: cancellation !== null, lease_expires_at: new Date(lease).toISOString() };
    });
  }

  /**
   * The submission a worker writes its output to, in the caller's transaction: held by the caller exactly as reports
   * must be (another account: 404; another worker id of the account: 409), claimed, and not finished more than
   * `graceSeconds` ago (output printed just before the exit may still be on its way when `complete` lands).
   */
  async heldForOutput(
    m: EntityManager,
    principal: Principal,
    id: string,
    workerId: string,
    graceSeconds: number,
  ): Promise<{ id: string; runId: string; jobId: string; submissionNum: number }> {
    const s = owned(await this.subs.holderFacts(m, id), id, holderOf(principal, workerId));
    if (isFinished(s.status) && s.finishedAt && s.now.getTime() - s.finishedAt.getTime() > graceSeconds * 1000)
      throw stale(`submission ${id} finished as ${s.status} more than ${graceSeconds} s ago: its output is closed`);
    return { id: s.id, runId: s.runId, jobId: s.jobId, submissionNum: s.submissionNum };
  }

  /**
   * One heartbeat for all the submissions a worker runs, in one transaction: the held ones (claimed by this account
   * and worker id, not finished) get a new lease and their usage accrued, as a single heartbeat would; each answer
   * says whether a cancellation above it asks the worker to stop it, and with which status and reason to report.
   * Anything else (unknown, another account's or worker's, finished, e.g. by a lapsed lease or the time limit) is
   * answered `held: false` without saying why: the worker stops it and reports nothing. Answers follow the request's
   * order; a repeated id gets the same answer twice.
   */
  async heartbeatMany(
    principal: Principal,
    workerId: string,
    ids: string[],
  ): Promise<{ submissions: HeartbeatItem[] }> {
    const holder = holderOf(principal, workerId);
    const answers = await this.tx.run(async (m) => {
      const locked = await this.subs.lockSubmissions(m, [...new Set(ids)]);
      const held = locked.filter(
        (s) =>
          s.claimedByUserId === holder.userId &&
          s.workerId === holder.workerId &&
          (HELD_STATUSES as readonly string[]).includes(s.status),
      );
      const leases = await this.subs.renewLeases(
        m,
        held.map((s) => s.id),
        this.env.RUNPLANE_LEASE_SECONDS,
      );
      const cancellations = await this.groups.effectiveCancellations([...new Set(held.map((s) => s.runId))], m);
      const under = held.filter((s) => cancellations.get(s.runId)?.has(s.jobGroupId));
      const spared = await this.spares.of(m, under);
      const alwaysRun = await this.subs.alwaysRunJobs(
        m,
        under.map((s) => s.jobId),
      );
      // Billing rows after the submissions (the lock order), run by run: concurrent batches take them in one order.
      const byRun = [...held].sort((a, b) => (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : a.id < b.id ? -1 : 1));
      await this.billing.accrueMany(
        m,
        byRun.map((s) => s.id),
      );
      return new Map(
        held.map((s): [string, HeartbeatItem] => {
          const found = cancellations.get(s.runId)?.get(s.jobGroupId);
          // An always_run job not spared is stopped by the abort over it: it reports that abort's outcome.
          const cancellation = spared.has(s.jobId) ? undefined : alwaysRun.has(s.jobId) ? abortOf(found) : found;
          const outcome = cancellation ? cancelledJobOutcome(cancellation) : null;
          return [
            s.id,
            {
              submission_id: s.id,
              held: true,
              cancel_requested: outcome !== null,
              status: outcome?.status ?? null,
              reason: outcome?.terminationReason ?? null,
              lease_expires_at: leases.get(s.id)?.toISOString() ?? null,
            },
          ];
        }),
      );
    });
    return {
      submissions: ids.map(
        (id) =>
          answers.get(id) ?? {
            submission_id: id,
            held: false,
            cancel_requested: false,
            status: null,
            reason: null,
            lease_expires_at: null,
          },
      ),
    };
  }

  /**
   * A worker's final report. Repeating it returns the same answer and changes nothing; a report for a submission
   * that is not the job's latest, or from another worker, is a 409 that changes nothing; from another service
   * account, a 404; an outcome the state machine does not allow from the submission's status, a 409
   * `TRANSITION_NOT_ALLOWED`. (The (status, reason) pair itself was checked by the DTO.)
   */
  async complete(principal: Principal, id: string, body: CompleteInput): Promise<CompleteResult> {
    const exitStatus = body.exit_status ?? null;
    const runtimeData = body.runtime_data ?? null;
    const holder = holderOf(principal, body.worker_id);
    return this.tx.run(async (m) => {
      // An outcome that cannot be retried (the common `done`) is locked and finished in one statement when the report
      // is current and allowed from the submission's status; a retryable one needs the run's retry policy first.
      const retryable = isRetryableStatus(body.status);
      const from = heldStatusesAllowing(body.status, body.termination_reason);
      const current = retryable
        ? null
        : await this.subs.finishIfLatest(
            m,
            id,
            holder,
            from,
            body.status,
            body.termination_reason,
            exitStatus,
            runtimeData,
          );
      if (current?.finished) {
        const s = current.submission;
        await this.finisher.close(m, s, body.status, body.termination_reason);
        return this.finisher.countFinal(
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
      const job = required(locked, `submission ${id}`).job;
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
      if (runtimeData) await this.subs.setRuntimeData(m, s, runtimeData);
      // Usage up to now is closed first, before the group counters and the run are locked (the lock order), so
      // billing adds nothing to the time those hot rows are held.
      return this.finisher.finishLocked(m, s, job, body.status, body.termination_reason, exitStatus);
    });
  }

  private answer(s: SubmissionFacts, job: JobFacts): CompleteResult {
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
}
