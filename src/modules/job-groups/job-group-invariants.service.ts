import { Injectable } from '@nestjs/common';
import { abortOf, cancelledJobOutcome } from '../lifecycle/outcomes';
import type { DirectOutcomes } from '../jobs/jobs.service';
import { GroupCounts } from './dto/job-group.dto';
import { effectiveCounts } from './group-counts';
import { JobGroupViewsService } from './job-group-views.service';
import { COUNTER_TOKENS } from './counter-tokens';
import { JobGroupCounterReadsRepository } from './job-group-counter-reads.repository';
import { JobGroupsRepository } from './job-groups.repository';

/** The job-group tree's invariant checks: every group's counters against the tallies of its subtree's jobs. */
@Injectable()
export class JobGroupInvariantsService {
  constructor(
    private readonly groups: JobGroupsRepository,
    private readonly reads: JobGroupCounterReadsRepository,
    private readonly views: JobGroupViewsService,
  ) {}

  /**
   * Invariant 1: every group's counts (as shown, its token rows summed) equal the sum over the jobs of its whole
   * subtree (with no negative sum: a row alone may be negative, a job started on one token and ended on another),
   * and every group has all its token rows, flagged alike; a job
   * not yet counted is cancelled if a group above it is cancelled and active otherwise. `direct` are per-group
   * job tallies from the jobs module. Returns one line per mismatch.
   */
  async counterMismatches(direct: DirectOutcomes[]): Promise<string[]> {
    const cancellations = await this.views.effectiveCancellations(await this.groups.cancelledRunIds());
    const key = (run: string, g: number) => `${run}/${g}`;
    const expected = new Map<string, GroupCounts>();
    const expectedAborted = new Map<string, number>();
    const expectedOpen = new Map<string, number>();
    const expectedPending = new Map<string, number>();
    const abortedBy = (runId: string, g: number) => {
      const c = cancellations.get(runId)?.get(g);
      return c !== undefined && cancelledJobOutcome(c).status === 'aborted';
    };
    /** An abort lies over the group (maybe above its earliest cancellation): always_run jobs there are stopped. */
    const abortOver = (runId: string, g: number) => abortOf(cancellations.get(runId)?.get(g)) !== null;
    const tally = new Map(direct.map((d) => [key(d.runId, d.jobGroupId), d]));
    for (const { runId, jobGroupId, ancestorId } of await this.groups.allClosure()) {
      const d = tally.get(key(runId, jobGroupId));
      if (!d) continue;
      const cancelledBelow = cancellations.get(runId)?.has(jobGroupId) ?? false;
      const e = expected.get(key(runId, ancestorId)) ?? {
        n_jobs: 0,
        n_completed: 0,
        n_succeeded: 0,
        n_failed: 0,
        n_cancelled: 0,
      };
      // Uncounted always_run jobs below a cancellation still run (count later) unless it was an abort.
      const stopped = d.nUncounted - (abortOver(runId, jobGroupId) ? 0 : d.nUncountedAlwaysRun);
      const cancelled = d.nCancelled + (cancelledBelow ? stopped : 0);
      e.n_jobs += d.nJobs;
      e.n_succeeded += d.nSucceeded;
      e.n_failed += d.nFailed;
      e.n_cancelled += cancelled;
      e.n_completed += d.nSucceeded + d.nFailed + cancelled;
      expected.set(key(runId, ancestorId), e);
      // An abort above an earlier cancellation counted the always_run jobs that one had left running.
      const aborted =
        d.nAborted +
        (abortedBy(runId, jobGroupId)
          ? d.nUncounted
          : abortOver(runId, jobGroupId) && cancelledBelow
            ? d.nUncountedAlwaysRun
            : 0);
      expectedAborted.set(key(runId, ancestorId), (expectedAborted.get(key(runId, ancestorId)) ?? 0) + aborted);
      // Uncounted always_run jobs stay open unless an abort lies over them: it counted them on its group and every
      // level above (levels between their group and the abort show none open anyway: the abort lies over them too).
      const open = abortOver(runId, jobGroupId) ? 0 : d.nUncountedAlwaysRun;
      expectedOpen.set(key(runId, ancestorId), (expectedOpen.get(key(runId, ancestorId)) ?? 0) + open);
      // Pending counts are raw: every level counts its subtree's pending jobs, cancelled or not.
      expectedPending.set(key(runId, ancestorId), (expectedPending.get(key(runId, ancestorId)) ?? 0) + d.nPending);
    }
    const out: string[] = (await this.reads.rowMismatches()).map(
      (r) =>
        `run ${r.runId} group ${r.jobGroupId}: ${r.rows} counter rows (want ${COUNTER_TOKENS}), cancelled flags ` +
        `${r.flags}, disagreeing with job_groups_cancelled or among themselves`,
    );
    for (const c of await this.reads.allCounters()) {
      const shown = effectiveCounts(
        c,
        cancellations.get(c.runId)?.has(c.jobGroupId) ?? false,
        !abortOver(c.runId, c.jobGroupId),
      );
      const want = expected.get(key(c.runId, c.jobGroupId)) ?? {
        n_jobs: 0,
        n_completed: 0,
        n_succeeded: 0,
        n_failed: 0,
        n_cancelled: 0,
      };
      if (JSON.stringify(shown) !== JSON.stringify(want))
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: ` +
            `counters ${JSON.stringify(shown)} but jobs say ${JSON.stringify(want)}`,
        );
      const shownAborted =
        c.nAborted +
        (abortedBy(c.runId, c.jobGroupId)
          ? c.nJobs - c.nCompleted
          : abortOver(c.runId, c.jobGroupId)
            ? (c.nAlwaysRunOpen ?? 0)
            : 0);
      const wantAborted = expectedAborted.get(key(c.runId, c.jobGroupId)) ?? 0;
      if (shownAborted !== wantAborted)
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: counters say ${shownAborted} aborted but jobs say ${wantAborted}`,
        );
      const shownOpen = abortOver(c.runId, c.jobGroupId) ? 0 : (c.nAlwaysRunOpen ?? 0);
      const wantOpen = expectedOpen.get(key(c.runId, c.jobGroupId)) ?? 0;
      if (shownOpen !== wantOpen)
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: counters say ${shownOpen} always_run jobs open but jobs say ` +
            `${wantOpen}`,
        );
      const wantPending = expectedPending.get(key(c.runId, c.jobGroupId)) ?? 0;
      if (c.nPending !== wantPending)
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: counters say ${c.nPending} jobs pending but jobs say ${wantPending}`,
        );
    }
    return out;
  }
}
