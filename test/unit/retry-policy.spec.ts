import type { RetryEvent, RetryPolicy } from '../../src/modules/runs/dto/run-status';
import { FINISHED_STATUSES, isAllowedPair, TERMINATION_REASONS } from '../../src/modules/lifecycle/vocabulary';
import { DEFAULT_RETRY_DURATION_S, shouldRetry } from '../../src/modules/lifecycle/retry-policy';

const SUBMITTED = new Date('2025-01-01T00:00:00.000Z');
const after = (seconds: number) => new Date(SUBMITTED.getTime() + seconds * 1000);
const ALL: RetryPolicy = { on_events: ['no_capacity', 'interruption', 'error'] };

/** The contract's table: which retry event each termination reason is (the rest are never retried). */
const EVENT_OF: Record<string, RetryEvent> = {
  failed_to_start_due_to_no_capacity: 'no_capacity',
  interrupted_by_no_capacity: 'no_capacity',
  instance_unreachable: 'interruption',
  container_exited_with_error: 'error',
  executor_error: 'error',
};

describe('shouldRetry: retry decisions', () => {
  it('retries exactly the failed outcomes whose event is in the policy, over every (status, reason) pair', () => {
    for (const status of FINISHED_STATUSES) {
      for (const reason of TERMINATION_REASONS) {
        if (!isAllowedPair(status, reason)) continue;
        for (const event of ['no_capacity', 'interruption', 'error'] as const) {
          const policy: RetryPolicy = { on_events: [event], max_attempts: 5 };
          const expected = status === 'failed' && EVENT_OF[reason] === event;
          expect([status, reason, event, shouldRetry(policy, status, reason, 1, SUBMITTED, after(1))]).toEqual([
            status,
            reason,
            event,
            expected,
          ]);
        }
      }
    }
  });

  it('never retries without a policy, or with an empty list of events', () => {
    expect(shouldRetry(undefined, 'failed', 'executor_error', 1, SUBMITTED, after(1))).toBe(false);
    expect(shouldRetry({ on_events: [] }, 'failed', 'executor_error', 1, SUBMITTED, after(1))).toBe(false);
  });

  it.each<[string, RetryPolicy, number, number, boolean]>([
    // [label, policy, attempts so far, seconds since the job was submitted, retried]
    ['max_attempts 3: after the 1st attempt', { ...ALL, max_attempts: 3 }, 1, 10, true],
    ['max_attempts 3: after the 2nd attempt', { ...ALL, max_attempts: 3 }, 2, 10, true],
    ['max_attempts 3: after the 3rd attempt (counts every submission)', { ...ALL, max_attempts: 3 }, 3, 10, false],
    ['max_attempts 1: never', { ...ALL, max_attempts: 1 }, 1, 0, false],
    ['max_attempts alone sets no time limit', { ...ALL, max_attempts: 3 }, 1, 30 * 86400, true],
    ['duration_s 60: within', { ...ALL, duration_s: 60 }, 100, 59.999, true],
    ['duration_s 60: at the limit', { ...ALL, duration_s: 60 }, 1, 60, false],
    ['duration_s 60: past it', { ...ALL, duration_s: 60 }, 1, 61, false],
    ['duration_s alone sets no attempt limit', { ...ALL, duration_s: 3600 }, 10_000, 1, true],
    ['both: attempts left but past the duration', { ...ALL, duration_s: 60, max_attempts: 5 }, 1, 61, false],
    ['both: within the duration but out of attempts', { ...ALL, duration_s: 60, max_attempts: 5 }, 5, 1, false],
    ['both: within both', { ...ALL, duration_s: 60, max_attempts: 5 }, 4, 59, true],
    ['neither: the default hour, within it', ALL, 1000, DEFAULT_RETRY_DURATION_S - 0.001, true],
    ['neither: the default hour, at its end', ALL, 1, DEFAULT_RETRY_DURATION_S, false],
  ])('%s', (_label, policy, attempts, seconds, retried) => {
    expect(shouldRetry(policy, 'failed', 'container_exited_with_error', attempts, SUBMITTED, after(seconds))).toBe(
      retried,
    );
  });

  it('the default duration is an hour (dstack default)', () => {
    expect(DEFAULT_RETRY_DURATION_S).toBe(3600);
  });
});
