/**
 * The order in which every lifecycle transaction takes its row locks. Two transactions that lock rows in one order
 * cannot deadlock each other; each repository statement of the lifecycle locks within one step, and a transaction
 * moves only forward through these steps (skipping any). The hottest rows come last, so they are held for the
 * shortest time.
 */
export const LOCK_ORDER = [
  /** `job_submissions` rows (a claim locks only the candidates it packed, with SKIP LOCKED, in priority order). */
  'submission',
  /** `jobs` rows, always after their submission (`FOR UPDATE OF s, j`). */
  'job',
  /** `billing_attempts`, `billing_*_usage` shards: usage closed before any counter is locked. */
  'billing',
  /**
   * `events`: appended (no lock held on others' rows; the identity is taken at insert), by an INSERT of their own or
   * riding on billing's closing statement (StatementRider: JobFinisher.close), before any counter is locked.
   */
  'events',
  /**
   * `job_group_counters`, deepest group first, the run's root (group 0) last, each group's token rows in token order:
   * a transaction locks its own token's row of each level it counts into, and every row of a level it must read
   * whole (a cancellation's target; a failure's fail-fast levels). Runs in run id order.
   */
  'group_counters',
  /** `job_groups_cancelled`, inserted under the locked chain. */
  'group_cancellation',
  /**
   * `runs`: only the settle after a commit (RunStatusService) locks a run row, in a transaction of its own that then
   * writes its groups' recorded statuses (`job_groups`) and their events.
   */
  'run',
] as const;

export type LockStep = (typeof LOCK_ORDER)[number];
