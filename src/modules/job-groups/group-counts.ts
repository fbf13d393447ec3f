import { abortOf, type Cancellation } from '../lifecycle/outcomes';
import { GroupCounts, GroupStatus, JobGroupView, toCancellationView } from './dto/job-group.dto';
import { JobGroup, type JobGroupState } from './entities/job-group.entity';
import type { ActiveCounts, Counts } from './job-group-rows';

// Pure arithmetic on a group's counters and the view built from them: no database, no Nest.

/** A group whose status (as its view shows it) changed, and its new status. */
export interface GroupStatusChange {
  jobGroupId: number;
  status: GroupStatus;
}

/** What a run's status derives from: its root group's counters and active counts, and a stop (group 0 cancelled). */
export interface RootState {
  counts: Counts & ActiveCounts;
  stopReason: string | null;
}

/** A group's settlement: the status and state its view shows now, against those it last recorded. */
export interface GroupSettlement {
  jobGroupId: number;
  stored: { status: GroupStatus; state: JobGroupState };
  now: { status: GroupStatus; state: JobGroupState };
  /** The group is under a cancellation that explains a `cancelled` status (its group.cancelled event says it). */
  explained: boolean;
}

/**
 * The status and state a group's view shows, from its counters, whether a cancellation lies over it, and whether
 * always_run jobs there go on (no abort over it): as toView.
 */
export function viewStatus(
  counts: Counts,
  cancelled: boolean,
  spareAlwaysRun: boolean,
): { status: GroupStatus; state: JobGroupState } {
  const eff = effectiveCounts(counts, cancelled, spareAlwaysRun);
  return { status: groupStatus(eff, cancelled), state: eff.n_completed === eff.n_jobs ? 'complete' : 'running' };
}

/** The settlements that record something: a status or state that moved. */
export const unsettled = (s: readonly GroupSettlement[]): GroupSettlement[] =>
  s.filter((g) => g.stored.status !== g.now.status || g.stored.state !== g.now.state);

/** The group.status changes a settlement announces: a new status, but not one a cancellation explains. */
export const announced = (s: readonly GroupSettlement[]): GroupStatusChange[] =>
  s
    .filter((g) => g.stored.status !== g.now.status && !(g.explained && g.now.status === 'cancelled'))
    .map((g) => ({ jobGroupId: g.jobGroupId, status: g.now.status }));

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
    state: eff.n_completed === eff.n_jobs ? 'complete' : 'running',
    status: groupStatus(eff, cancellation !== null),
    cancellation: cancellation ? toCancellationView(cancellation) : null,
    counts: { ...eff, n_pending: counts.nPending - pendingCancelled },
  };
}

export function toCancellation(r: Cancellation): Cancellation {
  return { jobGroupId: r.jobGroupId, cancelledAt: r.cancelledAt, cancelledBy: r.cancelledBy, reason: r.reason };
}
