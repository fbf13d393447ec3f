/** Row shapes and SQL column lists shared by the job-group repositories (groups and counters). */

export interface Counts {
  nJobs: number;
  nCompleted: number;
  nSucceeded: number;
  nFailed: number;
  nCancelled: number;
  /** Of nCancelled, the jobs that show as `aborted`. */
  nAborted: number;
  /** always_run jobs not counted yet (a cancellation other than an abort leaves them to run and count). */
  nAlwaysRunOpen?: number;
}

/**
 * The run's active counts, kept on its root group's counters row (zero on every other group), and the jobs waiting
 * for their parents (status `pending`), which every group counts for its subtree. A delta's `nPending` moves the
 * root's (other levels move through the statements that add, release or end pending jobs).
 */
export interface ActiveCounts {
  nProvisioning: number;
  nRunning: number;
  nRetrying: number;
  nPending: number;
}

export type ActiveDelta = Partial<ActiveCounts>;

/** An active delta as statement parameters, in the order the statements take them (provisioning … pending). */
export const activeDeltaParams = (d: ActiveDelta): number[] => [
  d.nProvisioning ?? 0,
  d.nRunning ?? 0,
  d.nRetrying ?? 0,
  d.nPending ?? 0,
];

/** Every count of a group's counters at zero (a start for sums). */
export const NO_COUNTS: Readonly<Counts & ActiveCounts> = {
  nJobs: 0,
  nCompleted: 0,
  nSucceeded: 0,
  nFailed: 0,
  nCancelled: 0,
  nAborted: 0,
  nAlwaysRunOpen: 0,
  nProvisioning: 0,
  nRunning: 0,
  nRetrying: 0,
  nPending: 0,
};

/**
 * One level of a locked chain (a group or an ancestor): the rows of the transaction's token are locked at every
 * level, and at the levels locked exactly all the group's rows, whose sums are then whole (no other transaction can
 * change them before this one ends).
 */
export interface ChainLevel {
  jobGroupId: number;
  level: number;
  cancelAfterNFailures: number | null;
  /** The group itself is cancelled (read from the locked, latest row version). */
  cancelled: boolean;
  /** The group's whole counts (all its rows summed) where every row was locked; null elsewhere. */
  exact: (Counts & ActiveCounts) | null;
}

export type CountsDelta = Partial<Counts>;

/** A delta as statement parameters, in the column order the counting statements take them (n_jobs … open). */
export const countsDeltaParams = (d: CountsDelta): number[] => [
  d.nJobs ?? 0,
  d.nCompleted ?? 0,
  d.nSucceeded ?? 0,
  d.nFailed ?? 0,
  d.nCancelled ?? 0,
  d.nAborted ?? 0,
  d.nAlwaysRunOpen ?? 0,
];

const COUNTS = `c.n_jobs AS "nJobs", c.n_completed AS "nCompleted", c.n_succeeded AS "nSucceeded",
                c.n_failed AS "nFailed", c.n_cancelled AS "nCancelled", c.n_aborted AS "nAborted",
                c.n_always_run_open AS "nAlwaysRunOpen"`;
const ACTIVE = `c.n_provisioning AS "nProvisioning", c.n_running AS "nRunning", c.n_retrying AS "nRetrying",
                c.n_pending AS "nPending"`;
/** COUNTS summed over a group's token rows (alias c; the query groups by the group). */
const SUMMED_COUNTS = `sum(c.n_jobs)::int AS "nJobs", sum(c.n_completed)::int AS "nCompleted",
                sum(c.n_succeeded)::int AS "nSucceeded", sum(c.n_failed)::int AS "nFailed",
                sum(c.n_cancelled)::int AS "nCancelled", sum(c.n_aborted)::int AS "nAborted",
                sum(c.n_always_run_open)::int AS "nAlwaysRunOpen"`;
/** ACTIVE summed over a group's token rows. */
const SUMMED_ACTIVE = `sum(c.n_provisioning)::int AS "nProvisioning", sum(c.n_running)::int AS "nRunning",
                sum(c.n_retrying)::int AS "nRetrying", sum(c.n_pending)::int AS "nPending"`;
const CANCELLATION = `x.job_group_id AS "jobGroupId", x.cancelled_at AS "cancelledAt", x.cancelled_by AS "cancelledBy",
                      x.reason`;

export { COUNTS, ACTIVE, SUMMED_COUNTS, SUMMED_ACTIVE, CANCELLATION };
