import { Injectable, OnModuleInit } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import { JobGroupsService } from '../job-groups/job-groups.service';
import { SubmissionsService } from '../jobs/submissions.service';
import { RunStatusService } from '../runs/run-status.service';
import { DependencyRelease } from './dependency-release.service';
import { type FinishItem, JobFinisher } from './job-finisher.service';
import type { SubmissionStatus } from './vocabulary';
import { type Cancellation, cancelledJobOutcome, stopsAlwaysRun } from './outcomes';

/**
 * Transitions the server makes without a worker, as bounded passes of background loops: lapsed leases, the time
 * limit, and queued submissions below a cancellation. Each pass is one or a few transactions in LOCK_ORDER.
 */
@Injectable()
export class ServerTransitionsService implements OnModuleInit {
  constructor(
    private readonly tx: TransactionRunner,
    private readonly subs: SubmissionsService,
    private readonly groups: JobGroupsService,
    private readonly groupViews: JobGroupViewsService,
    private readonly runStatus: RunStatusService,
    private readonly finisher: JobFinisher,
    private readonly loops: BackgroundLoopsService,
    private readonly dependents: DependencyRelease,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'lapsed_leases', everyMs: 2000, pass: () => this.expireLapsedLeases(200) });
    this.loops.register({ name: 'max_duration', everyMs: 1000, pass: () => this.expireOverdue(200) });
    // Up to half of each second on batches of 5,000 (about 0.3 s each on a 1,000,000-job run): a cancelled subtree
    // of 1,000,000 queued jobs is swept in a few minutes, and no transaction holds the run's rows long.
    this.loops.register({
      name: 'cancelled_sweep',
      everyMs: 1000,
      pass: () => this.sweepCancelled(20, 5000, 500),
    });
  }

  /** Lapsed leases: the worker is presumed gone, the attempt failed as `instance_unreachable` (and may retry). */
  async expireLapsedLeases(limit: number): Promise<number> {
    return this.tx.run(async (m) => {
      const lapsed = await this.subs.lockLapsed(m, limit);
      // The clock stopped at the last heartbeat (each one rolled usage up to its time): closed without accruing.
      await this.finisher.finishAll(m, await this.latest(m, lapsed, 'failed', 'instance_unreachable'), true);
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
      await this.finisher.finishAll(m, await this.latest(m, overdue, 'terminated', 'max_duration_exceeded'));
      return overdue.length;
    });
  }

  /** Of locked submissions, those that are their job's latest, with their jobs locked, to end as `status`. */
  private async latest(
    m: EntityManager,
    subs: readonly { id: string }[],
    status: SubmissionStatus,
    reason: string,
  ): Promise<FinishItem[]> {
    const locked = await this.subs.lockWithJobs(
      m,
      subs.map((s) => s.id),
    );
    return [...locked.values()]
      .filter((l) => l.job.latestSubmissionId === l.submission.id)
      .map((l) => ({ ...l, status, reason, exitStatus: null, runtimeData: null }));
  }

  /**
   * Terminates queued submissions below cancellations not yet swept, in batches of `batch`: with `budgetMs`, batch
   * after batch while that much time allows; without, one batch per cancellation.
   */
  async sweepCancelled(maxCancellations: number, batch: number, budgetMs = 0): Promise<number> {
    const deadline = Date.now() + budgetMs;
    let total = 0;
    for (const c of await this.groups.unswept(maxCancellations)) {
      // Batch after batch, each its own transaction, until the cancellation is swept or the pass's time is up.
      for (let more = true; more;) {
        const n = await this.sweepBatch(c, batch);
        total += n;
        more = n === batch && Date.now() < deadline;
      }
      if (Date.now() >= deadline && budgetMs > 0) break;
    }
    return total;
  }

  /** One batch of a cancellation's queued submissions ended, in one transaction; marks it swept when none is left. */
  private sweepBatch(c: Cancellation & { runId: string }, batch: number): Promise<number> {
    return this.tx.run(async (m) => {
      const ids = await this.groupViews.subtreeIds(c.runId, c.jobGroupId, m);
      const outcome = cancelledJobOutcome(c);
      // always_run jobs stay queued below a cancellation (and are claimed); an abort ends them too.
      const done = await this.subs.terminateQueued(
        m,
        c.runId,
        ids,
        outcome.status,
        outcome.terminationReason,
        batch,
        !stopsAlwaysRun(c),
      );
      const cascade = await this.dependents.afterFinal(
        m,
        c.runId,
        done.jobIds.map((jobId) => ({ jobId, status: outcome.status })),
      );
      if (done.n < batch) await this.groups.markSwept(m, c.runId, c.jobGroupId);
      await this.runStatus.moveActive(m, c.runId, { nRetrying: -done.retries, nPending: cascade.pending.nPending });
      return done.n;
    });
  }
}
