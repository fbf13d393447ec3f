/**
 * The job/submission state machine's vocabulary, written once as data: statuses, termination reasons, which reason
 * goes with which final status, and which moves are allowed from which status. Everything else (DTO validation, the
 * OpenAPI document, the worker lifecycle's checks, the SQL's status lists) derives from these tables. Pure data and
 * functions, no Nest: other modules import these words from here (and only from here).
 */

export const SUBMISSION_STATUSES = [
  'pending',
  'submitted',
  'provisioning',
  'running',
  'terminating',
  'done',
  'failed',
  'terminated',
  'aborted',
] as const;
export type SubmissionStatus = (typeof SUBMISSION_STATUSES)[number];

export const FINISHED_STATUSES = [
  'done',
  'failed',
  'terminated',
  'aborted',
] as const satisfies readonly SubmissionStatus[];
export type FinishedStatus = (typeof FINISHED_STATUSES)[number];
export const isFinished = (s: SubmissionStatus): s is FinishedStatus =>
  (FINISHED_STATUSES as readonly string[]).includes(s);

/** Statuses in which a worker holds the submission (under a lease); only these accept worker reports. */
export const HELD_STATUSES = ['provisioning', 'running', 'terminating'] as const satisfies readonly SubmissionStatus[];
export type HeldStatus = (typeof HELD_STATUSES)[number];

export const TERMINATION_REASONS = [
  'failed_to_start_due_to_no_capacity',
  'interrupted_by_no_capacity',
  'instance_unreachable',
  'container_exited_with_error',
  'executor_error',
  'max_duration_exceeded',
  'log_quota_exceeded',
  'done_by_runner',
  'stopped_by_user',
  'aborted_by_user',
  'job_group_cancelled',
  'fail_fast',
  'budget_exceeded',
  'dependency_failed',
] as const;
export type TerminationReason = (typeof TERMINATION_REASONS)[number];

/** Why a cancelled (stopped) job ended `terminated`: what its group's or an ancestor's cancellation said. */
const CANCELLED = [
  'stopped_by_user',
  'job_group_cancelled',
  'fail_fast',
  'budget_exceeded',
] as const satisfies readonly TerminationReason[];

/** The reasons each final status may carry: every (status, reason) pair outside this table is refused. */
export const REASONS_OF_STATUS: Readonly<Record<FinishedStatus, readonly TerminationReason[]>> = {
  done: ['done_by_runner'],
  failed: [
    'failed_to_start_due_to_no_capacity',
    'interrupted_by_no_capacity',
    'instance_unreachable',
    'container_exited_with_error',
    'executor_error',
    'log_quota_exceeded',
  ],
  // Stopped on purpose: by a user, a cancellation, the budget, the job's own time limit, or a failed parent.
  terminated: [...CANCELLED, 'max_duration_exceeded', 'dependency_failed'],
  aborted: ['aborted_by_user'],
};

/**
 * Reasons only the server decides, never a worker: a job whose parent failed is ended before it is ever claimed
 * (issue #12's dependencies). Everything else in the pair table a worker may report.
 */
export const SERVER_ONLY_REASONS: readonly TerminationReason[] = ['dependency_failed'];

/**
 * Every allowed move, as `from → to`; a move to a final status lists the reasons allowed on it (each a pair of
 * REASONS_OF_STATUS). Not listed means refused.
 * - `pending` waits for its job's parents (dependencies): the last parent's final outcome makes it `submitted`; a
 *   parent that did not succeed ends it (`dependency_failed`, unless the job is `always_run`), as may a cancellation.
 *   It is never claimed.
 * - `submitted` is queued: a claim moves it on; a cancellation ends it without a worker.
 * - `provisioning` is claimed but not started: it cannot be `done` (it never ran), nor fail in ways that need a
 *   running container (an exit status, an interruption, the time or log limit). It can fail to start, be lost
 *   (a lapsed lease), or be cancelled.
 * - `running` and `terminating` (being stopped) can end in any worker-reportable pair: a job asked to stop may still
 *   finish on its own first.
 */
export const TRANSITIONS: Readonly<
  Record<SubmissionStatus, Partial<Record<SubmissionStatus, readonly TerminationReason[] | true>>>
> = {
  pending: { submitted: true, terminated: [...CANCELLED, 'dependency_failed'], aborted: ['aborted_by_user'] },
  submitted: { provisioning: true, terminated: [...CANCELLED, 'dependency_failed'], aborted: ['aborted_by_user'] },
  provisioning: {
    running: true,
    terminating: true,
    failed: ['failed_to_start_due_to_no_capacity', 'executor_error', 'instance_unreachable'],
    terminated: CANCELLED,
    aborted: ['aborted_by_user'],
  },
  running: {
    terminating: true,
    done: REASONS_OF_STATUS.done,
    failed: REASONS_OF_STATUS.failed,
    terminated: REASONS_OF_STATUS.terminated.filter((r) => r !== 'dependency_failed'),
    aborted: REASONS_OF_STATUS.aborted,
  },
  terminating: {
    done: REASONS_OF_STATUS.done,
    failed: REASONS_OF_STATUS.failed,
    terminated: REASONS_OF_STATUS.terminated.filter((r) => r !== 'dependency_failed'),
    aborted: REASONS_OF_STATUS.aborted,
  },
  done: {},
  failed: {},
  terminated: {},
  aborted: {},
};

/** Whether `reason` may go with the final `status` at all. */
export function isAllowedPair(status: string, reason: string): boolean {
  return (REASONS_OF_STATUS as Record<string, readonly string[] | undefined>)[status]?.includes(reason) ?? false;
}

/** Whether a submission in `from` may move to `to` (with `reason`, for a final `to`). */
export function isAllowedTransition(from: SubmissionStatus, to: SubmissionStatus, reason?: string): boolean {
  const allowed = TRANSITIONS[from][to];
  if (allowed === undefined) return false;
  if (allowed === true) return reason === undefined;
  return reason !== undefined && (allowed as readonly string[]).includes(reason);
}

/** The (status, reason) pairs a worker may send to `complete`. */
const reportable = (s: FinishedStatus) => REASONS_OF_STATUS[s].filter((r) => !SERVER_ONLY_REASONS.includes(r));
export const WORKER_REPORTABLE: Readonly<Record<FinishedStatus, readonly TerminationReason[]>> = {
  done: reportable('done'),
  failed: reportable('failed'),
  terminated: reportable('terminated'),
  aborted: reportable('aborted'),
};

export const WORKER_REPORTABLE_REASONS: readonly TerminationReason[] = TERMINATION_REASONS.filter(
  (r) => !SERVER_ONLY_REASONS.includes(r),
);

export const isWorkerReportable = (status: string, reason: string): boolean =>
  (WORKER_REPORTABLE as Record<string, readonly string[] | undefined>)[status]?.includes(reason) ?? false;

/** The held statuses from which a worker's final report (status, reason) is allowed: a parameter for the SQL. */
export function heldStatusesAllowing(status: FinishedStatus, reason: string): HeldStatus[] {
  return HELD_STATUSES.filter((from) => isAllowedTransition(from, status, reason));
}

/** The retry policy's events (`retry.on_events`), each standing for some failure reasons. */
export const RETRY_EVENTS = ['no_capacity', 'interruption', 'error'] as const;
export type RetryEvent = (typeof RETRY_EVENTS)[number];

/** Which failure reasons each retry event stands for; a reason not listed is never retried. */
export const RETRY_EVENT_OF_REASON: Readonly<Partial<Record<TerminationReason, RetryEvent>>> = {
  failed_to_start_due_to_no_capacity: 'no_capacity',
  interrupted_by_no_capacity: 'no_capacity',
  instance_unreachable: 'interruption',
  container_exited_with_error: 'error',
  executor_error: 'error',
};

/** Only these final statuses can be retried (by the run's retry policy, for a reason mapped to a retry event). */
export const RETRYABLE_STATUSES = ['failed', 'terminated'] as const satisfies readonly FinishedStatus[];
export const isRetryableStatus = (s: string): boolean => (RETRYABLE_STATUSES as readonly string[]).includes(s);

/**
 * Reasons a group may be cancelled for that show, unchanged, as the termination reason of the jobs it stops; any
 * other (free-text) reason a user gives shows as `job_group_cancelled`.
 */
export const SYSTEM_CANCEL_REASONS = [
  'stopped_by_user',
  'aborted_by_user',
  'fail_fast',
  'budget_exceeded',
] as const satisfies readonly TerminationReason[];

/** The status of a job (and its submission 0) waiting for its parents: never claimed, never in the queue index. */
export const PENDING_STATUS = 'pending' as const satisfies SubmissionStatus;

/** Statuses a queued submission has (waiting for a claim). */
export const QUEUED_STATUSES = ['submitted'] as const satisfies readonly SubmissionStatus[];
