import fc from 'fast-check';
import type { ActiveCounts, Counts } from '../../src/modules/job-groups/job-group-rows';
import { deriveJobCounts } from '../../src/modules/runs/job-counts';

type Root = Counts & ActiveCounts;

const root = (c: Partial<Root>): Root => ({
  nJobs: 0,
  nCompleted: 0,
  nSucceeded: 0,
  nFailed: 0,
  nCancelled: 0,
  nAborted: 0,
  nProvisioning: 0,
  nRunning: 0,
  nRetrying: 0,
  nPending: 0,
  ...c,
});

describe('deriveJobCounts: a run’s job_counts from its root counters', () => {
  it.each<[string, Partial<Root>, Record<string, number>]>([
    ['a fresh run', { nJobs: 10 }, { submitted: 10 }],
    ['no jobs: no statuses at all', {}, {}],
    [
      'claimed and running',
      { nJobs: 10, nProvisioning: 3, nRunning: 2 },
      { submitted: 5, provisioning: 3, running: 2 },
    ],
    ['retries queued count as submitted', { nJobs: 4, nRetrying: 2, nRunning: 1 }, { submitted: 3, running: 1 }],
    [
      'outcomes: done, failed, and cancellations split into terminated and aborted',
      { nJobs: 10, nCompleted: 6, nSucceeded: 2, nFailed: 1, nCancelled: 3, nAborted: 1, nRunning: 1 },
      { submitted: 3, running: 1, done: 2, failed: 1, terminated: 2, aborted: 1 },
    ],
    ['every job finished: nothing active left out', { nJobs: 3, nCompleted: 3, nSucceeded: 3 }, { done: 3 }],
    ['all aborted', { nJobs: 2, nCompleted: 2, nCancelled: 2, nAborted: 2 }, { aborted: 2 }],
    [
      'jobs waiting for their parents are pending, apart from the queued ones',
      { nJobs: 10, nPending: 6, nRunning: 1, nCompleted: 1, nSucceeded: 1 },
      { pending: 6, submitted: 2, running: 1, done: 1 },
    ],
  ])('%s', (_label, c, expected) => {
    expect(deriveJobCounts(root(c))).toEqual(expected);
  });

  it('jobs still on workers below a cancellation show as cancelled, not as provisioning or running', () => {
    // 10 jobs; a group of 6 cancelled (counted: 6 cancelled) while 1 of them provisions and 2 run (1 terminating);
    // outside it, 1 runs and 3 are queued.
    const counts = deriveJobCounts(root({ nJobs: 10, nCompleted: 6, nCancelled: 6, nProvisioning: 1, nRunning: 3 }), {
      provisioning: 1,
      running: 1,
      terminating: 1,
    });
    expect(counts).toEqual({ submitted: 3, running: 1, terminated: 6 });
  });

  it('pending jobs below a cancellation show as cancelled (it counted them), not as pending', () => {
    // 8 jobs, 5 pending; a group holding 3 of the pending ones and 1 queued job was cancelled (4 counted).
    const counts = deriveJobCounts(root({ nJobs: 8, nPending: 5, nCompleted: 4, nCancelled: 4 }), { pending: 3 });
    expect(counts).toEqual({ pending: 2, submitted: 2, terminated: 4 });
  });

  it('terminating counts as running (the counters keep them together)', () => {
    expect(deriveJobCounts(root({ nJobs: 2, nRunning: 2 }), { terminating: 1 })).toEqual({ submitted: 1, running: 1 });
  });

  it('the counts always add up to the run’s jobs, none negative (any consistent counters)', () => {
    const consistent = fc
      .record({
        succeeded: fc.nat(50),
        failed: fc.nat(50),
        terminated: fc.nat(50),
        aborted: fc.nat(50),
        queued: fc.nat(50),
        provisioning: fc.nat(50),
        running: fc.nat(50),
        retrying: fc.nat(50),
        cancelledProvisioning: fc.nat(50),
        cancelledRunning: fc.nat(50),
        pending: fc.nat(50),
        cancelledPending: fc.nat(50),
      })
      .map((x) => {
        const nCancelled = x.terminated + x.aborted;
        // Jobs on workers below a cancellation are among the cancelled ones (counted when it happened).
        const cancelledProvisioning = Math.min(x.cancelledProvisioning, nCancelled);
        const cancelledRunning = Math.min(x.cancelledRunning, nCancelled - cancelledProvisioning);
        const cancelledPending = Math.min(x.cancelledPending, nCancelled - cancelledProvisioning - cancelledRunning);
        const nCompleted = x.succeeded + x.failed + nCancelled;
        return {
          root: root({
            nJobs: nCompleted + x.pending + x.queued + x.provisioning + x.running,
            nCompleted,
            nSucceeded: x.succeeded,
            nFailed: x.failed,
            nCancelled,
            nAborted: x.aborted,
            nProvisioning: x.provisioning + cancelledProvisioning,
            nRunning: x.running + cancelledRunning,
            nRetrying: Math.min(x.retrying, x.queued),
            nPending: x.pending + cancelledPending,
          }),
          onWorkersCancelled: {
            provisioning: cancelledProvisioning,
            running: cancelledRunning,
            pending: cancelledPending,
          },
          expected: {
            pending: x.pending,
            submitted: x.queued,
            provisioning: x.provisioning,
            running: x.running,
            done: x.succeeded,
            failed: x.failed,
            terminated: x.terminated,
            aborted: x.aborted,
          },
        };
      });
    fc.assert(
      fc.property(consistent, ({ root: r, onWorkersCancelled, expected }) => {
        const got = deriveJobCounts(r, onWorkersCancelled);
        expect(got).toEqual(Object.fromEntries(Object.entries(expected).filter(([, n]) => n !== 0)));
        expect(Object.values(got).reduce((a, b) => a + b, 0)).toBe(r.nJobs);
      }),
      { numRuns: 300 },
    );
  });
});
