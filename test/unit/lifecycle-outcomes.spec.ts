import {
  activeDelta,
  addDelta,
  CANCELLED_STATUSES,
  cancelledJobOutcome,
  effectiveJobStatus,
  OUTCOME_OF_STATUS,
  outcomeDelta,
  PROVISIONING_STATUSES,
  RETRY_QUEUED_STATUSES,
  RUNNING_STATUSES,
  statusesOfOutcome,
} from '../../src/modules/lifecycle/outcomes';
import { LOCK_ORDER } from '../../src/modules/lifecycle/lock-order';
import { shouldRetry } from '../../src/modules/lifecycle/retry-policy';
import { sqlIn, sqlWords } from '../../src/modules/lifecycle/sql';
import { FINISHED_STATUSES, SUBMISSION_STATUSES, type SubmissionStatus } from '../../src/modules/lifecycle/vocabulary';

/** The state machine's arithmetic, written out independently of src/ and compared case by case. */
describe('lifecycle outcomes', () => {
  it.each([
    ['done', 'succeeded', { nCompleted: 1, nSucceeded: 1, nFailed: 0, nCancelled: 0, nAborted: 0 }],
    ['failed', 'failed', { nCompleted: 1, nSucceeded: 0, nFailed: 1, nCancelled: 0, nAborted: 0 }],
    ['terminated', 'cancelled', { nCompleted: 1, nSucceeded: 0, nFailed: 0, nCancelled: 1, nAborted: 0 }],
    ['aborted', 'aborted', { nCompleted: 1, nSucceeded: 0, nFailed: 0, nCancelled: 1, nAborted: 1 }],
  ] as const)('a job ending %s counts as %s with deltas %j', (status, outcome, delta) => {
    expect(OUTCOME_OF_STATUS[status]).toBe(outcome);
    expect(outcomeDelta(outcome)).toEqual(delta);
  });

  it('every final status has an outcome, and outcomes list their statuses back', () => {
    expect(Object.keys(OUTCOME_OF_STATUS).sort()).toEqual([...FINISHED_STATUSES].sort());
    expect(statusesOfOutcome('succeeded')).toEqual(['done']);
    expect(statusesOfOutcome('failed')).toEqual(['failed']);
    expect([...CANCELLED_STATUSES].sort()).toEqual(['aborted', 'terminated']);
  });

  const ACTIVE: Record<SubmissionStatus, [first: object, retry: object]> = {
    // Waiting for parents: on no worker and no retry (only submission 0 is ever pending).
    pending: [{}, {}],
    submitted: [{}, { nRetrying: 1 }],
    provisioning: [{ nProvisioning: 1 }, { nProvisioning: 1 }],
    running: [{ nRunning: 1 }, { nRunning: 1 }],
    terminating: [{ nRunning: 1 }, { nRunning: 1 }],
    done: [{}, {}],
    failed: [{}, {}],
    terminated: [{}, {}],
    aborted: [{}, {}],
  };
  it.each(SUBMISSION_STATUSES.map((s) => [s]))('a submission %s occupies the active counts it should', (status) => {
    expect(activeDelta(status, 1, 0)).toEqual(ACTIVE[status][0]);
    expect(activeDelta(status, 1, 3)).toEqual(ACTIVE[status][1]);
    const leaving = activeDelta(status, -1, 3);
    for (const [k, v] of Object.entries(ACTIVE[status][1])) expect(leaving[k as keyof typeof leaving]).toBe(-v);
  });

  it('status lists for SQL derive from the same table', () => {
    expect(PROVISIONING_STATUSES).toEqual(['provisioning']);
    expect(RUNNING_STATUSES).toEqual(['running', 'terminating']);
    expect(RETRY_QUEUED_STATUSES).toEqual(['submitted']);
  });

  it('adds active deltas key by key', () => {
    expect(addDelta({ nProvisioning: 1 }, { nProvisioning: -1, nRetrying: 2, nPending: -3 })).toEqual({
      nProvisioning: 0,
      nRunning: 0,
      nRetrying: 2,
      nPending: -3,
    });
  });

  const at = new Date('2026-01-01T00:00:00Z');
  it.each([
    ['aborted_by_user', 'aborted', 'aborted_by_user'],
    ['stopped_by_user', 'terminated', 'stopped_by_user'],
    ['fail_fast', 'terminated', 'fail_fast'],
    ['budget_exceeded', 'terminated', 'budget_exceeded'],
    ['job_group_cancelled', 'terminated', 'job_group_cancelled'],
    ['maintenance window', 'terminated', 'job_group_cancelled'],
  ])('a cancellation for %j shows its jobs as %s/%s', (reason, status, shown) => {
    const c = { jobGroupId: 2, cancelledAt: at, cancelledBy: 'ann', reason };
    expect(cancelledJobOutcome(c)).toEqual({ status, terminationReason: shown });
  });

  it('effective status: a cancellation wins over a stored status unless the outcome was counted', () => {
    const c = { jobGroupId: 1, cancelledAt: at, cancelledBy: 'ann', reason: 'stopped_by_user' };
    const running = { status: 'running' as const, terminationReason: null, completionCounted: false };
    const done = { status: 'done' as const, terminationReason: 'done_by_runner', completionCounted: true };
    expect(effectiveJobStatus(running, null)).toEqual({
      status: 'running',
      terminationReason: null,
      cancelledBy: null,
    });
    expect(effectiveJobStatus(running, c)).toEqual({
      status: 'terminated',
      terminationReason: 'stopped_by_user',
      cancelledBy: c,
    });
    expect(effectiveJobStatus(done, c)).toEqual({
      status: 'done',
      terminationReason: 'done_by_runner',
      cancelledBy: null,
    });
  });

  it('retry decisions follow the policy: event, attempts, duration, status', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const later = (s: number) => new Date(t0.getTime() + s * 1000);
    const policy = { on_events: ['error' as const], max_attempts: 3 };
    expect(shouldRetry(policy, 'failed', 'container_exited_with_error', 1, t0, later(10))).toBe(true);
    expect(shouldRetry(policy, 'failed', 'container_exited_with_error', 3, t0, later(10))).toBe(false);
    expect(shouldRetry(policy, 'failed', 'instance_unreachable', 1, t0, later(10))).toBe(false);
    expect(shouldRetry(policy, 'done', 'done_by_runner', 1, t0, later(10))).toBe(false);
    expect(shouldRetry(undefined, 'failed', 'container_exited_with_error', 1, t0, later(10))).toBe(false);
    const timed = { on_events: ['no_capacity' as const], duration_s: 60 };
    expect(shouldRetry(timed, 'failed', 'failed_to_start_due_to_no_capacity', 9, t0, later(59))).toBe(true);
    expect(shouldRetry(timed, 'failed', 'failed_to_start_due_to_no_capacity', 9, t0, later(60))).toBe(false);
    // Neither a duration nor an attempt limit: an hour after submission.
    const open = { on_events: ['interruption' as const] };
    expect(shouldRetry(open, 'failed', 'instance_unreachable', 50, t0, later(3599))).toBe(true);
    expect(shouldRetry(open, 'failed', 'instance_unreachable', 50, t0, later(3600))).toBe(false);
  });

  it('SQL constants admit only vocabulary words', () => {
    expect(sqlIn('status', ['submitted'])).toBe(`status = 'submitted'`);
    expect(sqlIn('status', ['running', 'terminating'])).toBe(`status IN ('running', 'terminating')`);
    expect(() => sqlWords(["x'; DROP TABLE jobs; --"])).toThrow('not a vocabulary word');
  });

  it('the lock order puts the hottest rows last', () => {
    expect(LOCK_ORDER.indexOf('submission')).toBeLessThan(LOCK_ORDER.indexOf('job'));
    expect(LOCK_ORDER.indexOf('billing')).toBeLessThan(LOCK_ORDER.indexOf('group_counters'));
    expect(LOCK_ORDER[LOCK_ORDER.length - 1]).toBe('run');
  });
});
