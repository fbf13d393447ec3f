import { abortOf, type Cancellation } from '../lifecycle/outcomes';
import { GroupCounts, GroupStatus, JobGroupView, toCancellationView } from './dto/job-group.dto';
import { JobGroup } from './entities/job-group.entity';
import type { ActiveCounts, ActiveDelta, Counts } from './job-group-rows';

// Pure arithmetic on a group's counters and the view built from them: no database, no Nest.

/** A group whose status (as its view shows it) changed in the caller's transaction, and its new status. */
export interface GroupStatusChange {
  jobGroupId: number;
  status: GroupStatus;
}

/** What a run's status derives from: its root group's counters and active counts, and a stop (group 0 cancelled). */
export interface RootState {
  counts: Counts & ActiveCounts;
  stopReason: string | null;
}

/**
 * A transaction's change to a run's root, both ends taken while holding the root's counters row: the state it
 * found (the last committed one) and the state it leaves.
 */
export interface RootChange {
  before: RootState;
  after: RootState;
}

/** Counters as they were before `d` and `active` were added. */
export function subtract(c: Counts & ActiveCounts, d: Partial<Counts>, active: ActiveDelta): Counts & ActiveCounts {
  return {
    nJobs: c.nJobs - (d.nJobs ?? 0),
    nCompleted: c.nCompleted - (d.nCompleted ?? 0),
    nSucceeded: c.nSucceeded - (d.nSucceeded ?? 0),
    nFailed: c.nFailed - (d.nFailed ?? 0),
    nCancelled: c.nCancelled - (d.nCancelled ?? 0),
    nAborted: c.nAborted - (d.nAborted ?? 0),
    nProvisioning: c.nProvisioning - (active.nProvisioning ?? 0),
    nRunning: c.nRunning - (active.nRunning ?? 0),
    nRetrying: c.nRetrying - (active.nRetrying ?? 0),
    nPending: c.nPending - (active.nPending ?? 0),
  };
}

export function addTo(c: Counts, nJobs: number): Counts {
  return { ...pickCounts(c), nJobs: c.nJobs + nJobs };
}

/** The groups among `rows` whose every job is counted complete. */
export function completeIds(rows: (Counts & { jobGroupId: number })[]): number[] {
  return rows.filter((r) => r.nCompleted === r.nJobs).map((r) => r.jobGroupId);
}

const pickCounts = (c: Counts): Counts => ({
  nJobs: c.nJobs,
  nCompleted: c.nCompleted,
  nSucceeded: c.nSucceeded,
  nFailed: c.nFailed,
  nCancelled: c.nCancelled,
  nAborted: c.nAborted,
});

/**
 * The groups whose status (as `groupStatus` shows it) differs between two states of the same levels. A level that a
 * cancellation made in the same transaction covers (`cancelledAfter`, none before: callers only pass uncancelled
 * chains) and that shows as `cancelled` is left out: that cancellation's own record says it.
 */
export function statusChanges(
  levels: { jobGroupId: number; before: Counts; after: Counts; cancelledAfter?: boolean }[],
): GroupStatusChange[] {
  const out: GroupStatusChange[] = [];
  for (const l of levels) {
    const was = groupStatus(effectiveCounts(l.before, false), false);
    const cancelled = l.cancelledAfter ?? false;
    const now = groupStatus(effectiveCounts(l.after, cancelled), cancelled);
    if (now !== was && !(cancelled && now === 'cancelled')) out.push({ jobGroupId: l.jobGroupId, status: now });
  }
  return out;
}

/**
 * Counts as the API shows them. Under a cancellation, jobs not yet counted are cancelled: the stored counters of
 * groups below the cancelled one were (by design) not touched, so the difference is added here, at read.
 */
export function effectiveCounts(c: Counts, cancelled: boolean, spareAlwaysRun = true): GroupCounts {
  // always_run jobs not counted yet are not stopped by a cancellation (an abort stops them): they show as running.
  const pending = cancelled ? c.nJobs - c.nCompleted - (spareAlwaysRun ? (c.nAlwaysRunOpen ?? 0) : 0) : 0;
  return {
    n_jobs: c.nJobs,
    n_completed: c.nCompleted + pending,
    n_succeeded: c.nSucceeded,
    n_failed: c.nFailed,
    n_cancelled: c.nCancelled + pending,
  };
}

/** failure > cancelled > success > running. */
export function groupStatus(c: GroupCounts, cancelled: boolean): GroupStatus {
  if (c.n_failed > 0) return 'failure';
  if (cancelled || (c.n_completed === c.n_jobs && c.n_cancelled > 0)) return 'cancelled';
  if (c.n_completed === c.n_jobs) return 'success';
  return 'running';
}

/**
 * A group's view from its counters. `pendingCancelled` are the pending jobs of its subtree that a cancellation shows
 * as cancelled (read from the jobs by the caller, which only has to when the subtree holds pending jobs and a
 * cancellation).
 */
export function toView(
  g: JobGroup,
  counts: Counts & { nPending: number },
  cancellation: Cancellation | null,
  pendingCancelled = 0,
): JobGroupView {
  const eff = effectiveCounts(counts, cancellation !== null, abortOf(cancellation) === null);
  return {
    job_group_id: g.jobGroupId,
    parent_id: g.parentId,
    depth: g.depth,
    attributes: g.attributes,
    cancel_after_n_failures: g.cancelAfterNFailures,
    // A cancelled group with a running always_run job is still running.
    state: eff.n_completed === eff.n_jobs ? 'complete' : g.state,
    status: groupStatus(eff, cancellation !== null),
    cancellation: cancellation ? toCancellationView(cancellation) : null,
    counts: { ...eff, n_pending: counts.nPending - pendingCancelled },
  };
}

export function toCancellation(r: Cancellation): Cancellation {
  return { jobGroupId: r.jobGroupId, cancelledAt: r.cancelledAt, cancelledBy: r.cancelledBy, reason: r.reason };
}
