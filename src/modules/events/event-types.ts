import type { TerminationReason } from '../lifecycle/vocabulary';

/**
 * The event feed's vocabulary: which events exist, what each one's fields mean, and the small constructors every
 * writer uses (so each call site stays one line). Pure data and functions, no Nest.
 *
 * - `run.status`: a run's status changed (`status` is the new run status, `reason` its termination reason, if any).
 *   Written where the run row's status is written (RunsService.refreshStatus) and at submission (`submitted`).
 * - `job.status`: a job's latest submission changed status: claimed (`provisioning`), started (`running`), finished
 *   (`done`, `failed`, `terminated`, `aborted`, with its termination reason), or, on a retry, the failed attempt's
 *   event followed by the new submission's (`submitted`, with the next `submission_num`).
 * - `group.status`: a job group's status (as `GET .../job-groups/{g}` shows it: running, success, failure,
 *   cancelled) changed: its first failure, its completion, jobs added to a complete group. Never for group 0 (the
 *   run's own `run.status` says it) and never for a change a cancellation explains (its `group.cancelled` does).
 * - `group.cancelled`: a group was cancelled (by a user, a stop of the run: group 0, fail-fast, the budget): one
 *   event for the whole subtree, `reason` the cancellation's reason and `by` who cancelled. Jobs the cancellation
 *   stops get no events of their own: queued ones are ended by a sweep that writes no job events (a run status it
 *   changes is a `run.status`), and ones on workers report their end as usual.
 * - `project.budget_exceeded`: the project's cost reached its billing limit and the budget loop stopped its runs
 *   (once per pass that stopped some, in the transaction of the first stop; each stop is a `group.cancelled`).
 */
export const EVENT_TYPES = [
  'run.status',
  'job.status',
  'group.status',
  'group.cancelled',
  'project.budget_exceeded',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** What each type records, for the OpenAPI document (the comment above says it at length). */
export const EVENT_TYPE_MEANINGS: Readonly<Record<EventType, string>> = {
  'run.status':
    "a run's status changed (`status`; `reason` is its termination reason, if any); `submitted` at submission",
  'job.status':
    "a job's latest submission (`submission_num`) changed status: `provisioning` (claimed), `running`, or final with " +
    "its termination reason; a retry is the failed attempt's event then the next submission's `submitted`",
  'group.status':
    "a job group's status changed (running, success, failure, cancelled: first failure, completion, jobs added); " +
    'never for group 0 (see run.status) nor for what a cancellation explains (see group.cancelled)',
  'group.cancelled':
    'a group was cancelled (by a user, a stop of the run: group 0, fail-fast, the budget): one event for the whole ' +
    "subtree, with the cancellation's `reason` and `by`; the jobs it stops get no events of their own unless a " +
    'worker was running them',
  'project.budget_exceeded':
    "the project's cost reached its billing limit: its active runs are being stopped (each stop a group.cancelled " +
    'with reason budget_exceeded)',
};

/** An event to record; every field but `type` and `projectId` may be left out where it does not apply. */
export interface NewEvent {
  type: EventType;
  projectId: string;
  runId?: string | null;
  jobGroupId?: number | null;
  jobId?: string | null;
  submissionNum?: number | null;
  status?: string | null;
  reason?: string | null;
  /** Who did it (a user's name, or `system`). */
  by?: string | null;
}

/** A submission as the lifecycle holds it. */
export interface SubmissionRef {
  runId: string;
  jobGroupId: number;
  jobId: string;
  submissionNum: number;
}

export const runStatusEvent = (projectId: string, runId: string, status: string, reason: string | null): NewEvent => ({
  type: 'run.status',
  projectId,
  runId,
  jobGroupId: 0,
  status,
  reason,
});

export const jobStatusEvent = (
  projectId: string,
  s: SubmissionRef,
  status: string,
  reason: string | null = null,
): NewEvent => ({
  type: 'job.status',
  projectId,
  runId: s.runId,
  jobGroupId: s.jobGroupId,
  jobId: s.jobId,
  submissionNum: s.submissionNum,
  status,
  reason,
});

export const groupStatusEvents = (
  projectId: string,
  runId: string,
  changes: readonly { jobGroupId: number; status: string }[],
): NewEvent[] =>
  changes
    .filter((c) => c.jobGroupId !== 0)
    .map((c) => ({ type: 'group.status', projectId, runId, jobGroupId: c.jobGroupId, status: c.status }));

export const groupCancelledEvent = (
  projectId: string,
  runId: string,
  c: { jobGroupId: number; cancelledBy: string; reason: string },
): NewEvent => ({
  type: 'group.cancelled',
  projectId,
  runId,
  jobGroupId: c.jobGroupId,
  status: 'cancelled',
  reason: c.reason,
  by: c.cancelledBy,
});

/** A cancellation and the status changes that came with it (ancestors it completed), as recorded together. */
export const cancellationEvents = (
  projectId: string,
  runId: string,
  c: { jobGroupId: number; cancelledBy: string; reason: string },
  changes: readonly { jobGroupId: number; status: string }[] = [],
): NewEvent[] => [groupCancelledEvent(projectId, runId, c), ...groupStatusEvents(projectId, runId, changes)];

export const budgetExceededEvent = (projectId: string): NewEvent => ({
  type: 'project.budget_exceeded',
  projectId,
  reason: 'budget_exceeded' satisfies TerminationReason,
  by: 'system',
});
