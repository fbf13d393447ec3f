import { Injectable } from '@nestjs/common';
import { EntityManager, QueryFailedError } from 'typeorm';
import type { Principal } from '../../common/auth/principal';
import { DomainError } from '../../common/errors/domain-error';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { SubmissionsService } from '../jobs/submissions.service';
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
import { type HeldReport, owned, ReportApplier, stale } from './report-applier.service';
import { isFinished } from './vocabulary';

/** The most reports one transaction applies (whole requests: one batch may bring it past this alone). */
const MAX_REPORTS_PER_TRANSACTION = 200;
/**
 * Transactions of reports at once. With one, the requests arriving while it runs gather for the next; two measured
 * 0.97× one through the throughput bench (single reports, 8 workers), their transactions smaller.
 */
const MAX_IN_FLIGHT = 1;

/**
 * An error a report's own rows may cause (a constraint or a data exception: SQLSTATE classes 23 and 22), rather than
 * the service failing (the database away, a deadlock outliving its retries) or a bug.
 */
function causedByData(err: unknown): boolean {
  const code = err instanceof QueryFailedError ? (err.driverError as { code?: unknown }).code : undefined;
  return typeof code === 'string' && (code.startsWith('23') || code.startsWith('22'));
}

/** A request's reports waiting to be applied, and its answer. */
interface Queued {
  items: HeldReport[];
  resolve: (outcomes: ReportOutcome[]) => void;
  reject: (err: unknown) => void;
}

/**
 * What workers report about their submissions: running → heartbeat → complete, one report a request (a single
 * route) or a batch of them.
 *
 * The reports of requests arriving together are applied together: while a transaction of reports runs, the
 * requests that arrive wait, and the next transaction takes all of them (up to MAX_REPORTS_PER_TRANSACTION, at most
 * MAX_IN_FLIGHT at once), so reports share their statements and commits (ReportApplier: one statement a step for
 * all). Each report is still judged and answered exactly as its route would; a request answers once its reports'
 * transaction has committed (the run statuses it moved settle after: RunStatusService). A submission's reports take
 * effect in the order they came: a transaction holds at most one report per submission, the others going to the next
 * transactions (waves).
 * A transaction starts as soon as it may, never held for more reports. Holding it for the reports of the workers the
 * last one answered made transactions larger (8 reports where ~4, held up to 8 ms), but the database then waited
 * while the server took those requests in one by one; unheld, it works on one group of workers' reports while the
 * server reads the next group's (held up to 1 ms: 1.09× and 0.87× in two sittings of the throughput bench).
 * Should a wave fail for a reason one report's rows cause (a constraint, a data exception), its reports are applied
 * again one by one, so that report fails alone; a failure of the service itself (the database away) fails every
 * request of the wave, as each would have failed alone, what earlier waves applied staying applied.
 */
@Injectable()
export class WorkerReportsService {
  private readonly queue: Queued[] = [];
  private inFlight = 0;

  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly applier: ReportApplier,
  ) {}

  running(principal: Principal, id: string, body: RunningInput): Promise<RunningAnswer> {
    return this.single(principal, { kind: 'running', submissionId: id, body }) as Promise<RunningAnswer>;
  }

  /** Renews the lease; answers whether the submission's group (or an ancestor) was cancelled meanwhile. */
  heartbeat(principal: Principal, id: string, body: HeartbeatInput): Promise<HeartbeatAnswer> {
    return this.single(principal, { kind: 'heartbeat', submissionId: id, body }) as Promise<HeartbeatAnswer>;
  }

  /**
   * A worker's final report. Repeating it returns the same answer and changes nothing; a report for a submission
   * that is not the job's latest, or from another worker, is a 409 that changes nothing; from another service
   * account, a 404; an outcome the state machine does not allow from the submission's status, a 409
   * `TRANSITION_NOT_ALLOWED`. (The (status, reason) pair itself was checked by the DTO.)
   */
  complete(principal: Principal, id: string, body: CompleteInput): Promise<CompleteResult> {
    return this.single(principal, { kind: 'complete', submissionId: id, body }) as Promise<CompleteResult>;
  }

  private async single(
    principal: Principal,
    report: Report,
  ): Promise<RunningAnswer | HeartbeatAnswer | CompleteResult> {
    const [outcome] = await this.submit([
      { holder: { workerId: report.body.worker_id, userId: principal.userId }, report },
    ]);
    if (outcome.error) throw outcome.error;
    return outcome.answer;
  }

  /**
   * A batch of one worker's reports, in order: each entry a report, or the error its validation met (answered as
   * it is). Each report gets its route's answer; one refused never touches the others.
   */
  async batch(
    principal: Principal,
    workerId: string,
    reports: readonly (Report | DomainError)[],
  ): Promise<ReportOutcome[]> {
    const holder = { workerId, userId: principal.userId };
    const valid = reports.flatMap((r, i) => (r instanceof DomainError ? [] : [{ i, report: r }]));
    const applied = valid.length > 0 ? await this.submit(valid.map(({ report }) => ({ holder, report }))) : [];
    const out: ReportOutcome[] = reports.map((r) => ({ error: r as DomainError }));
    valid.forEach(({ i }, k) => (out[i] = applied[k]));
    return out;
  }

  /** Queues a request's reports; resolves with their outcomes once their transactions have committed. */
  private submit(items: HeldReport[]): Promise<ReportOutcome[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ items, resolve, reject });
      this.pump();
    });
  }

  /** Starts transactions while there are queued requests and room for one more in flight. */
  private pump(): void {
    while (this.inFlight < MAX_IN_FLIGHT && this.queue.length > 0) {
      const group: Queued[] = [];
      let n = 0;
      while (
        this.queue.length > 0 &&
        (group.length === 0 || n + this.queue[0].items.length <= MAX_REPORTS_PER_TRANSACTION)
      ) {
        const next = this.queue.shift() as Queued;
        group.push(next);
        n += next.items.length;
      }
      this.inFlight++;
      void this.apply(group).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** Applies a group of requests' reports, wave after wave, and answers each request. */
  private async apply(group: Queued[]): Promise<void> {
    const outcomes = group.map((q) => new Array<ReportOutcome>(q.items.length));
    const failed = new Map<Queued, unknown>();
    // Wave w holds the w-th report of each submission, in the order they came.
    const waves: { k: number; j: number }[][] = [];
    const seen = new Map<string, number>();
    group.forEach((q, k) =>
      q.items.forEach(({ report }, j) => {
        const wave = seen.get(report.submissionId) ?? 0;
        seen.set(report.submissionId, wave + 1);
        (waves[wave] ??= []).push({ k, j });
      }),
    );
    try {
      for (const wave of waves) {
        const items = wave.map(({ k, j }) => group[k].items[j]);
        let results: ReportOutcome[];
        try {
          results = await this.tx.run((m) => this.applier.apply(m, items));
        } catch (err) {
          if (!causedByData(err)) throw err;
          results = [];
          for (const [x, item] of items.entries()) {
            try {
              results.push((await this.tx.run((m) => this.applier.apply(m, [item])))[0]);
            } catch (alone) {
              if (!causedByData(alone)) throw alone;
              // This report's rows fail it: its request fails as it would have alone, the others go on.
              failed.set(group[wave[x].k], alone);
              results.push({ error: new DomainError('CONFLICT', 'this report could not be applied') });
            }
          }
        }
        wave.forEach(({ k, j }, x) => (outcomes[k][j] = results[x]));
      }
    } catch (err) {
      for (const q of group) q.reject(err);
      return;
    }
    group.forEach((q, k) => {
      const err = failed.get(q);
      if (err !== undefined) q.reject(err);
      else q.resolve(outcomes[k]);
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
    const s = owned(await this.subs.holderFacts(m, id), id, { workerId, userId: principal.userId });
    if (isFinished(s.status) && s.finishedAt && s.now.getTime() - s.finishedAt.getTime() > graceSeconds * 1000)
      throw stale(`submission ${id} finished as ${s.status} more than ${graceSeconds} s ago: its output is closed`);
    return { id: s.id, runId: s.runId, jobId: s.jobId, submissionNum: s.submissionNum };
  }
}
