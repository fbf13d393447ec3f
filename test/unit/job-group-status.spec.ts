import 'reflect-metadata';
import { GroupCounts } from '../../src/modules/job-groups/dto/job-group.dto';
import { type Cancellation, cancelledJobOutcome } from '../../src/modules/lifecycle/outcomes';
import { SYSTEM_CANCEL_REASONS } from '../../src/modules/lifecycle/vocabulary';
import type { Counts } from '../../src/modules/job-groups/job-group-rows';
import { effectiveCounts, groupStatus } from '../../src/modules/job-groups/group-counts';
import { isAllowedPair } from '../../src/modules/lifecycle/vocabulary';

const counts = (c: Partial<GroupCounts>): GroupCounts => ({
  n_jobs: 0,
  n_completed: 0,
  n_succeeded: 0,
  n_failed: 0,
  n_cancelled: 0,
  ...c,
});

const stored = (c: Partial<Counts>): Counts => ({
  nJobs: 0,
  nCompleted: 0,
  nSucceeded: 0,
  nFailed: 0,
  nCancelled: 0,
  nAborted: 0,
  ...c,
});

describe('groupStatus: failure > cancelled > success > running', () => {
  it.each<[string, Partial<GroupCounts>, boolean, string]>([
    ['nothing finished yet', { n_jobs: 3 }, false, 'running'],
    ['some finished, some not', { n_jobs: 3, n_completed: 2, n_succeeded: 2 }, false, 'running'],
    ['every job succeeded', { n_jobs: 3, n_completed: 3, n_succeeded: 3 }, false, 'success'],
    ['an empty group', { n_jobs: 0 }, false, 'success'],
    ['a failure while others still run', { n_jobs: 3, n_completed: 1, n_failed: 1 }, false, 'failure'],
    [
      'a failure beats a cancellation of the group',
      { n_jobs: 3, n_completed: 3, n_failed: 1, n_cancelled: 2 },
      true,
      'failure',
    ],
    ['a failure beats success', { n_jobs: 2, n_completed: 2, n_succeeded: 1, n_failed: 1 }, false, 'failure'],
    ['the group (or an ancestor) cancelled', { n_jobs: 3, n_completed: 3, n_cancelled: 3 }, true, 'cancelled'],
    ['cancelled with nothing in it', { n_jobs: 0 }, true, 'cancelled'],
    ['cancelled while jobs still finish on workers', { n_jobs: 3, n_completed: 1, n_succeeded: 1 }, true, 'cancelled'],
    [
      'not cancelled itself, but complete with cancelled jobs (a descendant was)',
      { n_jobs: 3, n_completed: 3, n_succeeded: 1, n_cancelled: 2 },
      false,
      'cancelled',
    ],
    [
      'cancelled jobs below, others still running: running',
      { n_jobs: 3, n_completed: 2, n_cancelled: 2 },
      false,
      'running',
    ],
  ])('%s → %s', (_label, c, cancelled, expected) => {
    expect(groupStatus(counts(c), cancelled)).toBe(expected);
  });
});

describe('effectiveCounts: counters as the API shows them', () => {
  it('not under a cancellation: the stored counters, as they are', () => {
    expect(
      effectiveCounts(
        stored({ nJobs: 7, nCompleted: 4, nSucceeded: 1, nFailed: 1, nCancelled: 2, nAborted: 1 }),
        false,
      ),
    ).toEqual({ n_jobs: 7, n_completed: 4, n_succeeded: 1, n_failed: 1, n_cancelled: 2 });
  });

  it.each<[string, Partial<Counts>, GroupCounts]>([
    [
      'jobs not yet counted show as completed and cancelled',
      { nJobs: 7, nCompleted: 4, nSucceeded: 1, nFailed: 1, nCancelled: 2 },
      { n_jobs: 7, n_completed: 7, n_succeeded: 1, n_failed: 1, n_cancelled: 5 },
    ],
    [
      'nothing left to cancel: unchanged',
      { nJobs: 2, nCompleted: 2, nSucceeded: 2 },
      { n_jobs: 2, n_completed: 2, n_succeeded: 2, n_failed: 0, n_cancelled: 0 },
    ],
    ['an empty group', {}, { n_jobs: 0, n_completed: 0, n_succeeded: 0, n_failed: 0, n_cancelled: 0 }],
    [
      'nothing counted yet: every job cancelled',
      { nJobs: 5 },
      { n_jobs: 5, n_completed: 5, n_succeeded: 0, n_failed: 0, n_cancelled: 5 },
    ],
  ])('under a cancellation: %s', (_label, c, expected) => {
    const shown = effectiveCounts(stored(c), true);
    expect(shown).toEqual(expected);
    // What the view checks: the group reads as complete, and the sum holds.
    expect(shown.n_completed).toBe(shown.n_jobs);
    expect(shown.n_completed).toBe(shown.n_succeeded + shown.n_failed + shown.n_cancelled);
  });

  it('together with groupStatus: a cancelled group without failures reads cancelled, with one reads failure', () => {
    const view = (c: Partial<Counts>, cancelled: boolean) =>
      groupStatus(effectiveCounts(stored(c), cancelled), cancelled);
    expect(view({ nJobs: 4, nCompleted: 1, nSucceeded: 1 }, true)).toBe('cancelled');
    expect(view({ nJobs: 4, nCompleted: 1, nFailed: 1 }, true)).toBe('failure');
    expect(view({ nJobs: 4, nCompleted: 1, nSucceeded: 1 }, false)).toBe('running');
  });
});

describe('cancelledJobOutcome: how a job stopped by a cancellation shows', () => {
  const of = (reason: string) =>
    cancelledJobOutcome({ jobGroupId: 1, cancelledAt: new Date(0), cancelledBy: 'u', reason } as Cancellation);

  it.each<[string, { status: string; terminationReason: string }]>([
    ['aborted_by_user', { status: 'aborted', terminationReason: 'aborted_by_user' }],
    ['stopped_by_user', { status: 'terminated', terminationReason: 'stopped_by_user' }],
    ['fail_fast', { status: 'terminated', terminationReason: 'fail_fast' }],
    ['budget_exceeded', { status: 'terminated', terminationReason: 'budget_exceeded' }],
    // A user's own words (POST .../cancel {reason}) are the cancellation's, not the jobs'.
    ['enough', { status: 'terminated', terminationReason: 'job_group_cancelled' }],
    ['job_group_cancelled', { status: 'terminated', terminationReason: 'job_group_cancelled' }],
    ['', { status: 'terminated', terminationReason: 'job_group_cancelled' }],
    ['Aborted_By_User', { status: 'terminated', terminationReason: 'job_group_cancelled' }],
  ])('reason %j → %j', (reason, expected) => {
    expect(of(reason)).toEqual(expected);
  });

  it('every outcome it gives is a (status, reason) pair the state machine allows', () => {
    for (const reason of [...SYSTEM_CANCEL_REASONS, 'anything a user writes']) {
      const o = of(reason);
      expect([reason, isAllowedPair(o.status, o.terminationReason)]).toEqual([reason, true]);
    }
  });
});
