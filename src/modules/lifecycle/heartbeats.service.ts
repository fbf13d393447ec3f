import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import type { Principal } from '../../common/auth/principal';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { Env } from '../../config/env';
import { BillingService } from '../billing/billing.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { type SubmissionFacts, SubmissionsService } from '../jobs/submissions.service';
import type { HeartbeatAnswer, HeartbeatItem } from './lifecycle.types';
import { type Cancellation, cancelledJobOutcome } from './outcomes';
import { SparedJobs } from './spared-jobs.service';
import { HELD_STATUSES } from './vocabulary';

/**
 * Heartbeats: a lease renewed, usage accrued up to now, and whether a cancellation over the submission asks the
 * worker to stop it. Set-based whatever their number: a worker's one heartbeat for all it runs, and the heartbeats
 * of a batch of reports.
 */
@Injectable()
export class HeartbeatsService {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupViewsService,
    private readonly env: Env,
    private readonly billing: BillingService,
    private readonly spares: SparedJobs,
  ) {}

  /**
   * Heartbeats of held submissions (locked by the caller, held by the reporting worker, not finished): new leases,
   * `runtime_data` where sent, usage accrued (one statement each for all), and for each whether a cancellation
   * over it asks the worker to stop it (always_run jobs a cancellation spares go on).
   */
  async beat(
    m: EntityManager,
    items: readonly { s: SubmissionFacts; runtimeData: Record<string, unknown> | null }[],
  ): Promise<HeartbeatAnswer[]> {
    const { leases, stopping } = await this.renew(m, items);
    return items.map(({ s }) => ({
      cancel_requested: stopping.has(s.jobId),
      lease_expires_at: new Date(leases.get(s.id) ?? 0).toISOString(),
    }));
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
    const answers = await this.tx.run(async (m) => {
      const locked = await this.subs.lockSubmissions(m, [...new Set(ids)]);
      const held = locked.filter(
        (s) =>
          s.claimedByUserId === principal.userId &&
          s.workerId === workerId &&
          (HELD_STATUSES as readonly string[]).includes(s.status),
      );
      const { leases, stopping } = await this.renew(
        m,
        held.map((s) => ({ s, runtimeData: null })),
      );
      return new Map(
        held.map((s): [string, HeartbeatItem] => {
          // An always_run job not spared is stopped by the abort over it: it reports that abort's outcome.
          const cancellation = stopping.get(s.jobId);
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
   * The heartbeat of held submissions (locked by the caller): new leases and `runtime_data` where sent, usage
   * accrued, each in one statement for all; and the cancellation that stops each, by job id (SparedJobs.stopping).
   */
  private async renew(
    m: EntityManager,
    items: readonly { s: SubmissionFacts; runtimeData: Record<string, unknown> | null }[],
  ): Promise<{ leases: Map<string, Date>; stopping: Map<string, Cancellation> }> {
    if (items.length === 0) return { leases: new Map(), stopping: new Map() };
    const leases = await this.subs.heartbeatAll(
      m,
      items.map((i) => ({ id: i.s.id, runtimeData: i.runtimeData })),
      this.env.RUNPLANE_LEASE_SECONDS,
    );
    const cancellations = await this.groups.effectiveCancellations([...new Set(items.map((i) => i.s.runId))], m);
    const stopping = await this.spares.stopping(
      m,
      items.map((i) => i.s),
      cancellations,
    );
    // Billing rows after the submissions (the lock order), in one statement.
    await this.billing.accrue(
      m,
      items.map((i) => i.s.id),
    );
    return { leases, stopping };
  }
}
