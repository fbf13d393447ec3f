import { Injectable } from '@nestjs/common';
import { EntityManager, QueryFailedError } from 'typeorm';
import { Env } from '../../config/env';
import type { Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BillingService } from '../billing/billing.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { JobFacts, SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunStatusService } from '../runs/run-status.service';
import { HeartbeatsService } from './heartbeats.service';
import { type FinishItem, JobFinisher } from './job-finisher.service';
import { LifecycleEvents } from './lifecycle-events.service';
import type {
  CompleteInput,
  CompleteResult,
  HeartbeatAnswer,
  HeartbeatInput,
  Report,
  ReportOutcome,
  RunningAnswer,
  RunningInput,
} from './lifecycle.types';
import {
  FinishedStatus,
  HELD_STATUSES,
  isAllowedTransition,
  isFinished,
  SubmissionStatus,
  TRANSITIONS,
} from './vocabulary';
import { required } from '../../common/required';

const stale = (message: string) => new DomainError('STALE_SUBMISSION', message);

/** Who reports: the worker id in the body, under the service account whose token sent it. */
interface Holder {
  workerId: string;
  userId: string;
}

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
 * An error a report's own rows may cause (a constraint or a data exception: SQLSTATE classes 23 and 22), rather than
 * the service failing (the database away, a deadlock outliving its retries) or a bug.
 */
function causedByData(err: unknown): boolean {
  const code = err instanceof QueryFailedError ? (err.driverError as { code?: unknown }).code : undefined;
  return typeof code === 'string' && (code.startsWith('23') || code.startsWith('22'));
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
 * What workers report about their submissions: running → heartbeat → complete, one report a request (a single
 * route) or a batch of them. Whatever their number, reports for different submissions are applied together in one
 * transaction, set-based (one statement per step for all of them), each judged and answered exactly as its single
 * route would: locks in LOCK_ORDER (lock-order.ts): submissions with their jobs, billing, counters; statuses follow
 * the commit.
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
    private readonly heartbeats: HeartbeatsService,
  ) {}

  running(principal: Principal, id: string, body: RunningInput): Promise<RunningAnswer> {
    return this.one(principal, { kind: 'running', submissionId: id, body }) as Promise<RunningAnswer>;
  }

  /** Renews the lease; answers whether the submission's group (or an ancestor) was cancelled meanwhile. */
  heartbeat(principal: Principal, id: string, body: HeartbeatInput): Promise<HeartbeatAnswer> {
    return this.one(principal, { kind: 'heartbeat', submissionId: id, body }) as Promise<HeartbeatAnswer>;
  }

  /**
   * A worker's final report. Repeating it returns the same answer and changes nothing; a report for a submission
   * that is not the job's latest, or from another worker, is a 409 that changes nothing; from another service
   * account, a 404; an outcome the state machine does not allow from the submission's status, a 409
   * `TRANSITION_NOT_ALLOWED`. (The (status, reason) pair itself was checked by the DTO.)
   */
  complete(principal: Principal, id: string, body: CompleteInput): Promise<CompleteResult> {
    return this.one(principal, { kind: 'complete', submissionId: id, body }) as Promise<CompleteResult>;
  }

  private async one(principal: Principal, report: Report): Promise<RunningAnswer | HeartbeatAnswer | CompleteResult> {
    const holder = { workerId: report.body.worker_id, userId: principal.userId };
    const [outcome] = await this.tx.run((m) => this.apply(m, holder, [report]));
    if (outcome.error) throw outcome.error;
    return outcome.answer;
  }

  /**
   * A batch of one worker's reports, in order: each entry a report, or the error its validation met (answered as
   * it is). Reports are applied in waves, each wave holding at most one report per submission and applied in one
   * transaction, so a submission's reports take effect in the order sent; a report's refusal (stale, unknown, a
   * transition not allowed) is its own answer and never touches the others. Should a wave fail for another reason
   * (a database error one report's rows cause), its reports are applied again one by one, each as its route would;
   * a failure of the service itself (the database away) fails the request, the waves before it staying applied.
   */
  async batch(
    principal: Principal,
    workerId: string,
    reports: readonly (Report | DomainError)[],
  ): Promise<ReportOutcome[]> {
    const holder = { workerId, userId: principal.userId };
    const out: ReportOutcome[] = new Array(reports.length);
    const waves: number[][] = [];
    const seen = new Map<string, number>();
    reports.forEach((r, i) => {
      if (r instanceof DomainError) return void (out[i] = { error: r });
      const wave = seen.get(r.submissionId) ?? 0;
      seen.set(r.submissionId, wave + 1);
      (waves[wave] ??= []).push(i);
    });
    for (const wave of waves) {
      const mine = wave.map((i) => reports[i] as Report);
      let outcomes: ReportOutcome[];
      try {
        outcomes = await this.tx.run((m) => this.apply(m, holder, mine));
      } catch (err) {
        if (!causedByData(err)) throw err;
        outcomes = [];
        for (const r of mine) outcomes.push((await this.tx.run((m) => this.apply(m, holder, [r])))[0]);
      }
      wave.forEach((i, k) => (out[i] = outcomes[k]));
    }
    return out;
  }

  /**
   * Reports for distinct submissions of one worker, in the caller's transaction: the submissions and their jobs
   * locked in one statement, each report judged as its route would, then the accepted ones applied set-based:
   * heartbeats, then final reports (billing closed, outcomes counted), then starts.
   */
  async apply(m: EntityManager, holder: Holder, reports: readonly Report[]): Promise<ReportOutcome[]> {
    // Heartbeats lock their submissions alone: a running job's row may be held FOR SHARE a while by an add-jobs
    // request naming it as a parent, and a heartbeat must not wait for that.
    const locked = await this.subs.lockWithJobs(
      m,
      reports.filter((r) => r.kind !== 'heartbeat').map((r) => r.submissionId),
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
    reports.forEach((r, i) => {
      try {
        if (r.kind === 'heartbeat') {
          const s = owned(heartbeatFacts.get(r.submissionId), r.submissionId, holder);
          if (isFinished(s.status)) throw stale(`submission ${s.id} is already ${s.status}`);
          return void beats.push({ i, s, runtimeData: r.body.runtime_data ?? null });
        }
        const found = locked.get(r.submissionId);
        const s = owned(found?.submission, r.submissionId, holder);
        const job = required(found, `submission ${r.submissionId}`).job;
        if (r.kind === 'running') {
          if (s.status === 'running')
            out[i] = { answer: { status: s.status, lease_expires_at: s.leaseExpiresAt?.toISOString() ?? null } };
          else if (!isAllowedTransition(s.status, 'running'))
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
    const finished = await this.finisher.finishAll(m, finishes);
    finishes.forEach((f, k) => (out[f.i] = { answer: finished[k] }));
    const started = await this.start(m, starts);
    starts.forEach((st, k) => (out[st.i] = { answer: started[k] }));
    return out;
  }

  /**
   * Starts attempts (submissions locked, each held and provisioning): submissions and jobs `running` with fresh
   * leases, billing's clocks started with the pinned quantities, the runs' active counts moved, their events.
   */
  private async start(
    m: EntityManager,
    items: readonly { s: SubmissionFacts; provisioningData: Record<string, unknown> | null }[],
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
    return items.map((i) => ({
      status: 'running',
      lease_expires_at: required(started.get(i.s.id), `the start of submission ${i.s.id}`).leaseExpiresAt.toISOString(),
    }));
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
    const s = owned(await this.subs.holderFacts(m, id), id, { workerId, userId: principal.userId });
    if (isFinished(s.status) && s.finishedAt && s.now.getTime() - s.finishedAt.getTime() > graceSeconds * 1000)
      throw stale(`submission ${id} finished as ${s.status} more than ${graceSeconds} s ago: its output is closed`);
    return { id: s.id, runId: s.runId, jobId: s.jobId, submissionNum: s.submissionNum };
  }
}
