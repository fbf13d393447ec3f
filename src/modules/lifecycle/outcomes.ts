/**
 * The state machine's arithmetic: what a job's final status counts as on its groups' counters, what a submission
 * occupies on its run's active counts while in a status, and how a job shows below a cancelled group. Pure
 * functions over the vocabulary, table-tested in test/unit/lifecycle-outcomes.spec.ts.
 */
import {
  type FinishedStatus,
  SUBMISSION_STATUSES,
  type SubmissionStatus,
  SYSTEM_CANCEL_REASONS,
  type TerminationReason,
} from './vocabulary';

/** A job's counted outcome; `aborted` is a cancellation that shows as `aborted` (in n_cancelled and n_aborted). */
export type JobOutcome = 'succeeded' | 'failed' | 'cancelled' | 'aborted';

export const OUTCOME_OF_STATUS: Readonly<Record<FinishedStatus, JobOutcome>> = {
  done: 'succeeded',
  failed: 'failed',
  terminated: 'cancelled',
  aborted: 'aborted',
};

/** The recursive counters a counted outcome adds to its group and every ancestor. */
export interface OutcomeDelta {
  nCompleted: number;
  nSucceeded: number;
  nFailed: number;
  nCancelled: number;
  nAborted: number;
}

export function outcomeDelta(outcome: JobOutcome): OutcomeDelta {
  const cancelled = outcome === 'cancelled' || outcome === 'aborted';
  return {
    nCompleted: 1,
    nSucceeded: outcome === 'succeeded' ? 1 : 0,
    nFailed: outcome === 'failed' ? 1 : 0,
    nCancelled: cancelled ? 1 : 0,
    nAborted: outcome === 'aborted' ? 1 : 0,
  };
}

/** A move of a run's active counts (jobs on workers and queued retries), kept on its root group's counters row. */
export interface ActiveDelta {
  nProvisioning?: number;
  nRunning?: number;
  nRetrying?: number;
  /** Jobs leaving (-) or entering (+) `pending`, waiting for their parents. */
  nPending?: number;
}

/** The active count a submission occupies on its run while in `status` (`sign` -1 when it leaves that status). */
export function activeDelta(status: SubmissionStatus, sign: 1 | -1, submissionNum: number): ActiveDelta {
  if (status === 'provisioning') return { nProvisioning: sign };
  if (status === 'running' || status === 'terminating') return { nRunning: sign };
  if (status === 'submitted' && submissionNum > 0) return { nRetrying: sign };
  return {};
}

/** The sum of two deltas (of counts or of active counts), key by key; a key in neither stays out. */
export function addDeltas<D extends { [K in keyof D]?: number }>(a: D, b: D): D {
  const out: Record<string, number | undefined> = { ...a };
  for (const [k, v] of Object.entries(b) as [string, number | undefined][]) out[k] = (out[k] ?? 0) + (v ?? 0);
  return out as D;
}

/** The sum of two active deltas, every active count present. */
export function addDelta(a: ActiveDelta, b: ActiveDelta): ActiveDelta {
  return { nProvisioning: 0, nRunning: 0, nRetrying: 0, nPending: 0, ...addDeltas(a, b) };
}

/** A group's cancellation record: who cancelled which group, when and why. */
export interface Cancellation {
  jobGroupId: number;
  cancelledAt: Date;
  cancelledBy: string;
  reason: string;
  /** When this one is not an abort: the earliest abort over the same group, if any (it stops always_run jobs). */
  abort?: Cancellation | null;
}

/** The reason of a cancellation that is an abort (a run stopped with `abort: true`, or a cancel given that reason). */
export const ABORT_REASON: TerminationReason = 'aborted_by_user';

/** Whether a cancellation stops always_run jobs too: only an abort does. */
export const stopsAlwaysRun = (c: Pick<Cancellation, 'reason'>): boolean => c.reason === ABORT_REASON;

/** The abort over a group, given the cancellation in force there (itself, or the abort recorded with it). */
export const abortOf = (c: Cancellation | null | undefined): Cancellation | null =>
  c ? (stopsAlwaysRun(c) ? c : (c.abort ?? null)) : null;

/**
 * The cancellation that stops a job, given the one in force over its group (the earliest, with the abort over it):
 * an always_run job only an abort stops, any other job that one.
 */
export const stoppingCancellation = (c: Cancellation | null | undefined, alwaysRun: boolean): Cancellation | null =>
  alwaysRun ? abortOf(c) : (c ?? null);

/** How a job stopped by a cancellation shows: `aborted` for an abort, `terminated` otherwise. */
export function cancelledJobOutcome(c: Cancellation): {
  status: 'terminated' | 'aborted';
  terminationReason: TerminationReason;
} {
  if (c.reason === 'aborted_by_user') return { status: 'aborted', terminationReason: 'aborted_by_user' };
  const system = (SYSTEM_CANCEL_REASONS as readonly string[]).includes(c.reason);
  return { status: 'terminated', terminationReason: system ? (c.reason as TerminationReason) : 'job_group_cancelled' };
}

/**
 * A job's effective status: under a cancelled group (its own or an ancestor), a job whose outcome was not counted
 * yet shows as the cancellation made it, whatever its stored status says (the sweep writes that later).
 */
export function effectiveJobStatus(
  stored: {
    status: SubmissionStatus;
    terminationReason: string | null;
    completionCounted: boolean;
    alwaysRun?: boolean;
  },
  cancellation: Cancellation | null,
): { status: SubmissionStatus; terminationReason: string | null; cancelledBy: Cancellation | null } {
  // An always_run job is not stopped by a cancellation, only by an abort (which may lie above the earliest one).
  cancellation = stoppingCancellation(cancellation, stored.alwaysRun === true);
  if (cancellation === null || stored.completionCounted) {
    return { status: stored.status, terminationReason: stored.terminationReason, cancelledBy: null };
  }
  const outcome = cancelledJobOutcome(cancellation);
  return { status: outcome.status, terminationReason: outcome.terminationReason, cancelledBy: cancellation };
}

/** The final statuses counted as `outcome` (parameters for SQL that tallies outcomes). */
export const statusesOfOutcome = (outcome: JobOutcome): FinishedStatus[] =>
  (Object.keys(OUTCOME_OF_STATUS) as FinishedStatus[]).filter((s) => OUTCOME_OF_STATUS[s] === outcome);

/** The final statuses a cancellation counts (terminated and aborted): n_cancelled. */
export const CANCELLED_STATUSES: readonly FinishedStatus[] = [
  ...statusesOfOutcome('cancelled'),
  ...statusesOfOutcome('aborted'),
];

/** Statuses counted in a run's n_provisioning and n_running (derived from activeDelta, so the two never differ). */
export const PROVISIONING_STATUSES: readonly SubmissionStatus[] = SUBMISSION_STATUSES.filter(
  (s) => activeDelta(s, 1, 0).nProvisioning === 1,
);
export const RUNNING_STATUSES: readonly SubmissionStatus[] = SUBMISSION_STATUSES.filter(
  (s) => activeDelta(s, 1, 0).nRunning === 1,
);
/** A queued submission counts as a retry (n_retrying) when it is not its job's first: submission_num > 0. */
export const RETRY_QUEUED_STATUSES: readonly SubmissionStatus[] = SUBMISSION_STATUSES.filter(
  (s) => activeDelta(s, 1, 1).nRetrying === 1,
);
