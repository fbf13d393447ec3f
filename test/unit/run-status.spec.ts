import { DerivedRunStatus, deriveRunStatus, RunFacts } from '../../src/modules/runs/dto/run-status';

/** A run's facts: counters of its root group, its active counts and a stop; everything not given is 0 / null. */
const facts = (f: Partial<RunFacts>): RunFacts => ({
  nJobs: 0,
  nCompleted: 0,
  nSucceeded: 0,
  nFailed: 0,
  nCancelled: 0,
  nProvisioning: 0,
  nRunning: 0,
  nRetrying: 0,
  stopReason: null,
  ...f,
});

const is = (status: string, statusMessage: string | null = null, terminationReason: string | null = null) =>
  ({ status, statusMessage, terminationReason }) as DerivedRunStatus;

describe('deriveRunStatus: run status from counters, never from history', () => {
  it.each<[string, Partial<RunFacts>, DerivedRunStatus]>([
    // Not every job counted yet: the most advanced activity shows.
    ['fresh run: every job queued', { nJobs: 3 }, is('submitted')],
    ['one job provisioning', { nJobs: 3, nProvisioning: 1 }, is('provisioning')],
    ['running beats provisioning', { nJobs: 3, nProvisioning: 1, nRunning: 1 }, is('running')],
    ['running while some are done', { nJobs: 3, nCompleted: 2, nSucceeded: 2, nRunning: 1 }, is('running')],
    ['queued while some are done', { nJobs: 3, nCompleted: 1, nSucceeded: 1 }, is('submitted')],
    [
      'queued while one failed (no failure until all are counted)',
      { nJobs: 2, nCompleted: 1, nFailed: 1 },
      is('submitted'),
    ],
    // Retries: `pending` only when every job not yet counted is waiting for its retry.
    ['every unfinished job retrying', { nJobs: 2, nRetrying: 2 }, is('pending', 'retrying')],
    [
      'every unfinished job retrying, the rest done',
      { nJobs: 3, nCompleted: 1, nSucceeded: 1, nRetrying: 2 },
      is('pending', 'retrying'),
    ],
    ['some retrying, some queued for the first time', { nJobs: 3, nRetrying: 2 }, is('submitted', 'retrying')],
    ['retrying while another runs', { nJobs: 2, nRetrying: 1, nRunning: 1 }, is('running', 'retrying')],
    ['retrying while another provisions', { nJobs: 2, nRetrying: 1, nProvisioning: 1 }, is('provisioning', 'retrying')],
    // Every job counted: the outcome, failure first.
    ['all succeeded', { nJobs: 2, nCompleted: 2, nSucceeded: 2 }, is('done', null, 'all_jobs_done')],
    [
      'one failed, one succeeded',
      { nJobs: 2, nCompleted: 2, nSucceeded: 1, nFailed: 1 },
      is('failed', null, 'job_failed'),
    ],
    [
      'one failed, one cancelled',
      { nJobs: 2, nCompleted: 2, nFailed: 1, nCancelled: 1 },
      is('failed', null, 'job_failed'),
    ],
    [
      'one succeeded, one cancelled (a group of it cancelled)',
      { nJobs: 2, nCompleted: 2, nSucceeded: 1, nCancelled: 1 },
      is('terminated', null, 'job_group_cancelled'),
    ],
    [
      'all counted (cancelled) but a worker still holds one',
      { nJobs: 2, nCompleted: 2, nCancelled: 2, nRunning: 1 },
      is('terminating', 'stopping cancelled jobs'),
    ],
    [
      'all counted but one still provisioning under a cancellation',
      { nJobs: 2, nCompleted: 2, nSucceeded: 1, nCancelled: 1, nProvisioning: 1 },
      is('terminating', 'stopping cancelled jobs'),
    ],
    ['no jobs yet', { nJobs: 0 }, is('submitted', 'no jobs yet')],
    // A stopped run (group 0 cancelled): the stop's reason, terminating until nothing is left on workers.
    [
      'stopped, a job still running',
      { nJobs: 2, nCompleted: 2, nCancelled: 2, nRunning: 1, stopReason: 'stopped_by_user' },
      is('terminating', 'stopping', 'stopped_by_user'),
    ],
    [
      'stopped, a job still provisioning',
      { nJobs: 2, nCompleted: 2, nCancelled: 2, nProvisioning: 1, stopReason: 'aborted_by_user' },
      is('terminating', 'stopping', 'aborted_by_user'),
    ],
    [
      'stopped, not every job counted yet',
      { nJobs: 2, nCompleted: 1, nCancelled: 1, stopReason: 'budget_exceeded' },
      is('terminating', 'stopping', 'budget_exceeded'),
    ],
    [
      'stopped and settled',
      { nJobs: 2, nCompleted: 2, nCancelled: 2, stopReason: 'stopped_by_user' },
      is('terminated', null, 'stopped_by_user'),
    ],
    [
      'stopped after a failure: the stop wins',
      { nJobs: 2, nCompleted: 2, nFailed: 1, nCancelled: 1, stopReason: 'stopped_by_user' },
      is('terminated', null, 'stopped_by_user'),
    ],
    ['stopped with no jobs', { nJobs: 0, stopReason: 'stopped_by_user' }, is('terminated', null, 'stopped_by_user')],
  ])('%s', (_label, given, expected) => {
    expect(deriveRunStatus(facts(given))).toEqual(expected);
  });
});
