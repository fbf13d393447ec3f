import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { COUNTER_TOKENS } from './counter-tokens';
import type { JobGroupState, StoredGroupStatus } from './entities/job-group.entity';
import {
  ACTIVE,
  type ActiveCounts,
  type ActiveDelta,
  type ChainLevel,
  COUNTS,
  type Counts,
  type CountsDelta,
  SUMMED_ACTIVE,
  SUMMED_COUNTS,
} from './job-group-rows';

/**
 * Locks the counter rows of a group's chain (the group and every ancestor) for a transaction writing on token $3:
 * at each level the row of that token, and every row of the levels that must be read whole: the groups in $4, and
 * with $5 those with fail-fast (`cancel_after_n_failures`). Rows are locked deepest level first (root last), each
 * level's in token order: the order every counter lock follows (depth, then group, then token), so two chains never
 * deadlock. Locked rows are read in their latest committed version, so `cancelled` is exact after waiting.
 */
const LOCK_CHAIN = `WITH locked AS (
  SELECT sa.ancestor_id AS "jobGroupId", sa.level, c.token, g.cancel_after_n_failures AS "cancelAfterNFailures",
         c.cancelled, ${COUNTS}, ${ACTIVE}
    FROM job_group_self_and_ancestors sa
    JOIN job_groups g ON g.run_id = sa.run_id AND g.job_group_id = sa.ancestor_id
    JOIN job_group_counters c ON c.run_id = sa.run_id AND c.job_group_id = sa.ancestor_id
     AND (c.token = $3 OR sa.ancestor_id = ANY($4::int[]) OR ($5 AND g.cancel_after_n_failures IS NOT NULL))
   WHERE sa.run_id = $1 AND sa.job_group_id = $2
   ORDER BY sa.level, c.token
     FOR UPDATE OF c
)`;

/** lockChainAndCount's statement (see there). */
const LOCK_CHAIN_AND_COUNT = `${LOCK_CHAIN},
       verdict AS (SELECT NOT coalesce(bool_or(cancelled), false) AS counted FROM locked),
       updated AS (
         UPDATE job_group_counters c
            SET n_jobs = c.n_jobs + CASE WHEN v.counted THEN $6 ELSE 0 END,
                n_completed = c.n_completed + CASE WHEN v.counted THEN $7 ELSE 0 END,
                n_succeeded = c.n_succeeded + CASE WHEN v.counted THEN $8 ELSE 0 END,
                n_failed = c.n_failed + CASE WHEN v.counted THEN $9 ELSE 0 END,
                n_cancelled = c.n_cancelled + CASE WHEN v.counted THEN $10 ELSE 0 END,
                n_aborted = c.n_aborted + CASE WHEN v.counted THEN $11 ELSE 0 END,
                n_always_run_open = c.n_always_run_open + CASE WHEN v.counted THEN $12 ELSE 0 END,
                n_provisioning = c.n_provisioning + CASE WHEN c.job_group_id = 0 THEN $13 ELSE 0 END,
                n_running = c.n_running + CASE WHEN c.job_group_id = 0 THEN $14 ELSE 0 END,
                n_retrying = c.n_retrying + CASE WHEN c.job_group_id = 0 THEN $15 ELSE 0 END,
                n_pending = c.n_pending + CASE WHEN c.job_group_id = 0 THEN $16 ELSE 0 END
           FROM verdict v
          WHERE c.run_id = $1 AND c.token = $3 AND c.job_group_id IN (SELECT "jobGroupId" FROM locked)
            AND (v.counted OR c.job_group_id = 0)
      RETURNING c.job_group_id AS "jobGroupId", c.token, ${COUNTS}, ${ACTIVE}
       )
       SELECT l."jobGroupId", l.level, l.token, l."cancelAfterNFailures", l.cancelled, v.counted,
              coalesce(u."nJobs", l."nJobs") AS "nJobs", coalesce(u."nCompleted", l."nCompleted") AS "nCompleted",
              coalesce(u."nSucceeded", l."nSucceeded") AS "nSucceeded", coalesce(u."nFailed", l."nFailed") AS "nFailed",
              coalesce(u."nCancelled", l."nCancelled") AS "nCancelled",
              coalesce(u."nAborted", l."nAborted") AS "nAborted",
              coalesce(u."nAlwaysRunOpen", l."nAlwaysRunOpen") AS "nAlwaysRunOpen",
              coalesce(u."nProvisioning", l."nProvisioning") AS "nProvisioning",
              coalesce(u."nRunning", l."nRunning") AS "nRunning", coalesce(u."nRetrying", l."nRetrying") AS "nRetrying",
              coalesce(u."nPending", l."nPending") AS "nPending"
         FROM locked l CROSS JOIN verdict v
         LEFT JOIN updated u ON u."jobGroupId" = l."jobGroupId" AND u.token = l.token
        ORDER BY l.level, l.token`;

type LockedRow = Counts &
  ActiveCounts & {
    jobGroupId: number;
    level: number;
    token: number;
    cancelAfterNFailures: number | null;
    cancelled: boolean;
  };

/** The locked rows of a chain as levels: flags from any row, sums where every row of the level was locked. */
function toLevels(rows: LockedRow[]): ChainLevel[] {
  const levels: ChainLevel[] = [];
  for (let i = 0; i < rows.length;) {
    const first = rows[i];
    let j = i;
    while (j < rows.length && rows[j].level === first.level) j++;
    const mine = rows.slice(i, j);
    levels.push({
      jobGroupId: first.jobGroupId,
      level: first.level,
      cancelAfterNFailures: first.cancelAfterNFailures,
      cancelled: mine.some((r) => r.cancelled),
      exact: mine.length === COUNTER_TOKENS ? sumRows(mine) : null,
    });
    i = j;
  }
  return levels;
}

function sumRows(rows: (Counts & ActiveCounts)[]): Counts & ActiveCounts {
  const s = {
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
  for (const r of rows) for (const k of Object.keys(s) as (keyof typeof s)[]) s[k] += Number(r[k] ?? 0);
  return s;
}

/** A group as a settle compares it (see JobGroupsService.settleInputs). */
export interface SettleRow extends Counts, ActiveCounts {
  runId: string;
  jobGroupId: number;
  status: StoredGroupStatus;
  state: JobGroupState;
  /** A cancellation lies over the group (its own or an ancestor's). */
  cancelled: boolean;
  /** An abort lies over the group (it stops always_run jobs too). */
  aborted: boolean;
  /** The reason of the run's stop (group 0's cancellation), if any. */
  stopReason: string | null;
}

/** The counter rows of groups: chain and cascade locking, counting on a token's rows, and the summed reads. */
@Injectable()
export class JobGroupCountersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Creates the counter rows of new groups: COUNTER_TOKENS zeroed rows each. */
  async insertGroups(m: EntityManager, runId: string, groupIds: number[]): Promise<void> {
    await m.query(
      `INSERT INTO job_group_counters (run_id, job_group_id, token)
       SELECT $1, g, t FROM unnest($2::int[]) g CROSS JOIN generate_series(0, $3::int - 1) t`,
      [runId, groupIds, COUNTER_TOKENS],
    );
  }

  /** See LOCK_CHAIN: `exactIds` are the levels to lock whole, `failFastExact` adds those with fail-fast. */
  async lockChain(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    token: number,
    exactIds: number[] = [],
    failFastExact = false,
  ): Promise<ChainLevel[]> {
    const rows = await m.query(`${LOCK_CHAIN} SELECT * FROM locked ORDER BY level, token`, [
      runId,
      jobGroupId,
      token,
      exactIds,
      failFastExact,
    ]);
    return toLevels(rows);
  }

  /**
   * lockChain and, unless a locked level is cancelled, counting `d` into the token's row of every level, in one
   * statement; the run's active counts on the root's token row move by `active` either way. Returns the levels as
   * they stand afterwards (sums where locked whole) and whether `d` was counted.
   */
  async lockChainAndCount(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    token: number,
    d: CountsDelta,
    active: ActiveDelta,
    failFastExact: boolean,
  ): Promise<{ levels: ChainLevel[]; counted: boolean }> {
    const rows = await preparedQuery<LockedRow & { counted: boolean }>(
      m,
      'job_groups_lock_chain_and_count',
      LOCK_CHAIN_AND_COUNT,
      [
        runId,
        jobGroupId,
        token,
        [],
        failFastExact,
        d.nJobs ?? 0,
        d.nCompleted ?? 0,
        d.nSucceeded ?? 0,
        d.nFailed ?? 0,
        d.nCancelled ?? 0,
        d.nAborted ?? 0,
        d.nAlwaysRunOpen ?? 0,
        active.nProvisioning ?? 0,
        active.nRunning ?? 0,
        active.nRetrying ?? 0,
        active.nPending ?? 0,
      ],
    );
    return { levels: toLevels(rows), counted: rows[0]?.counted ?? false };
  }

  /**
   * Locks the token's rows of several groups' chains (the groups and every ancestor) in one statement, in the one
   * order every counter lock follows (depth descending, group, token), and with `failFastExact` every row of the
   * levels with fail-fast. Each row says which of `groupIds` lie below it (itself included): their chains pass
   * through it.
   */
  async lockChains(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    token: number,
    failFastExact: boolean,
  ): Promise<(LockedRow & { below: number[] })[]> {
    return preparedQuery(
      m,
      'job_groups_lock_chains',
      `WITH chains AS (
         SELECT ancestor_id, array_agg(job_group_id) AS below FROM job_group_self_and_ancestors
          WHERE run_id = $1 AND job_group_id = ANY($2::int[]) GROUP BY ancestor_id
       )
       SELECT c.job_group_id AS "jobGroupId", g.depth AS level, c.token,
              g.cancel_after_n_failures AS "cancelAfterNFailures", c.cancelled, ch.below, ${COUNTS}, ${ACTIVE}
         FROM chains ch
         JOIN job_groups g ON g.run_id = $1 AND g.job_group_id = ch.ancestor_id
         JOIN job_group_counters c ON c.run_id = $1 AND c.job_group_id = ch.ancestor_id
          AND (c.token = $3 OR ($4 AND g.cancel_after_n_failures IS NOT NULL))
        ORDER BY g.depth DESC, c.job_group_id, c.token
          FOR UPDATE OF c`,
      [runId, groupIds, token, failFastExact],
    );
  }

  /**
   * Adds per-group deltas to the token's rows (already locked), and `active` to the root's, in one statement.
   */
  async addLevelCounts(
    m: EntityManager,
    runId: string,
    token: number,
    perGroup: ReadonlyMap<number, CountsDelta>,
    active: ActiveDelta,
  ): Promise<void> {
    const groups = [...new Set([...perGroup.keys(), 0])];
    const at = (g: number, k: keyof CountsDelta) => perGroup.get(g)?.[k] ?? 0;
    const root = (g: number, n: number | undefined) => (g === 0 ? (n ?? 0) : 0);
    await preparedQuery(
      m,
      'job_groups_add_level_counts',
      `UPDATE job_group_counters c
          SET n_completed = c.n_completed + v.completed, n_succeeded = c.n_succeeded + v.succeeded,
              n_failed = c.n_failed + v.failed, n_cancelled = c.n_cancelled + v.cancelled,
              n_aborted = c.n_aborted + v.aborted, n_always_run_open = c.n_always_run_open + v.open,
              n_provisioning = c.n_provisioning + v.provisioning, n_running = c.n_running + v.running,
              n_retrying = c.n_retrying + v.retrying, n_pending = c.n_pending + v.pending
         FROM unnest($3::int[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[], $9::int[], $10::int[],
                     $11::int[], $12::int[], $13::int[])
           AS v(g, completed, succeeded, failed, cancelled, aborted, open, provisioning, running, retrying, pending)
        WHERE c.run_id = $1 AND c.token = $2 AND c.job_group_id = v.g`,
      [
        runId,
        token,
        groups,
        groups.map((g) => at(g, 'nCompleted')),
        groups.map((g) => at(g, 'nSucceeded')),
        groups.map((g) => at(g, 'nFailed')),
        groups.map((g) => at(g, 'nCancelled')),
        groups.map((g) => at(g, 'nAborted')),
        groups.map((g) => at(g, 'nAlwaysRunOpen')),
        groups.map((g) => root(g, active.nProvisioning)),
        groups.map((g) => root(g, active.nRunning)),
        groups.map((g) => root(g, active.nRetrying)),
        groups.map((g) => root(g, active.nPending)),
      ],
    );
  }

  /** Moves the run's active counts on the root's row of `token`. */
  async moveActive(m: EntityManager, runId: string, token: number, d: ActiveDelta): Promise<void> {
    await preparedQuery(
      m,
      'job_groups_move_active',
      `UPDATE job_group_counters c SET n_provisioning = c.n_provisioning + $3, n_running = c.n_running + $4,
         n_retrying = c.n_retrying + $5, n_pending = c.n_pending + $6
        WHERE c.run_id = $1 AND c.job_group_id = 0 AND c.token = $2`,
      [runId, token, d.nProvisioning ?? 0, d.nRunning ?? 0, d.nRetrying ?? 0, d.nPending ?? 0],
    );
  }

  /** Flags every row of the group (all locked by the caller). */
  async markCancelled(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    await m.query(`UPDATE job_group_counters SET cancelled = true WHERE run_id = $1 AND job_group_id = $2`, [
      runId,
      jobGroupId,
    ]);
  }

  /** Adds `d` to the token's row of each of `groupIds`, and `pending` to their jobs waiting for parents. */
  async addCounts(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    token: number,
    d: CountsDelta,
    pending = 0,
  ): Promise<void> {
    if (groupIds.length === 0) return;
    await m.query(
      `UPDATE job_group_counters c
          SET n_jobs = n_jobs + $4, n_completed = n_completed + $5, n_succeeded = n_succeeded + $6,
              n_failed = n_failed + $7, n_cancelled = n_cancelled + $8, n_aborted = n_aborted + $9,
              n_always_run_open = n_always_run_open + $10, n_pending = n_pending + $11
        WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[]) AND c.token = $3`,
      [
        runId,
        groupIds,
        token,
        d.nJobs ?? 0,
        d.nCompleted ?? 0,
        d.nSucceeded ?? 0,
        d.nFailed ?? 0,
        d.nCancelled ?? 0,
        d.nAborted ?? 0,
        d.nAlwaysRunOpen ?? 0,
        pending,
      ],
    );
  }

  /**
   * Locks the token's rows of several groups and all their ancestors in one statement, in the one order every chain
   * lock agrees with (depth descending, then group id; the root last): a cascade across many groups never deadlocks
   * with a chain. Returns each locked row's group and cancelled flag, and the closure of `groupIds`. Without
   * `withRoot`, the root is left for the caller's own write of it (it is locked last, LOCK_ORDER). With
   * `failFastExact`, every row of the levels with fail-fast is locked too (a failure counted next in the same
   * transaction reads them whole: locked here, in order, rather than after these).
   */
  async lockGroups(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    token: number,
    withRoot = true,
    failFastExact = false,
  ): Promise<{
    rows: { jobGroupId: number; cancelled: boolean }[];
    closure: { jobGroupId: number; ancestorId: number }[];
  }> {
    const closure: { jobGroupId: number; ancestorId: number }[] = await m.query(
      `SELECT job_group_id AS "jobGroupId", ancestor_id AS "ancestorId" FROM job_group_self_and_ancestors
        WHERE run_id = $1 AND job_group_id = ANY($2::int[])`,
      [runId, groupIds],
    );
    const rows = await m.query(
      `SELECT c.job_group_id AS "jobGroupId", c.cancelled
         FROM job_group_counters c JOIN job_groups g ON g.run_id = c.run_id AND g.job_group_id = c.job_group_id
        WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[])
          AND (c.token = $3 OR ($4 AND g.cancel_after_n_failures IS NOT NULL))
        ORDER BY g.depth DESC, c.job_group_id, c.token
          FOR UPDATE OF c`,
      [
        runId,
        [...new Set(closure.map((c) => c.ancestorId))].filter((id) => withRoot || id !== 0),
        token,
        failFastExact,
      ],
    );
    return { rows, closure };
  }

  /**
   * Adds per-group deltas of completed-and-cancelled jobs and of jobs waiting for parents to the token's rows
   * (already locked): one statement.
   */
  async addCascadeCounts(
    m: EntityManager,
    runId: string,
    token: number,
    perGroup: Map<number, { cancelled: number; pending: number }>,
  ): Promise<void> {
    if (perGroup.size === 0) return;
    const values = [...perGroup.values()];
    await m.query(
      `UPDATE job_group_counters c SET n_completed = c.n_completed + v.n, n_cancelled = c.n_cancelled + v.n,
              n_pending = c.n_pending + v.p
         FROM unnest($3::int[], $4::int[], $5::int[]) AS v(g, n, p)
        WHERE c.run_id = $1 AND c.token = $2 AND c.job_group_id = v.g`,
      [runId, token, [...perGroup.keys()], values.map((v) => v.cancelled), values.map((v) => v.pending)],
    );
  }

  /**
   * Adds `n` jobs (`a` of them always_run, `p` waiting for parents) to many groups' token rows at once (run
   * submission): one statement.
   */
  async addJobCounts(
    m: EntityManager,
    runId: string,
    token: number,
    perGroup: Map<number, number>,
    alwaysRun: Map<number, number> = new Map(),
    pending: Map<number, number> = new Map(),
  ): Promise<void> {
    if (perGroup.size === 0) return;
    const groups = [...perGroup.keys()];
    await m.query(
      `UPDATE job_group_counters c SET n_jobs = c.n_jobs + v.n, n_always_run_open = c.n_always_run_open + v.a,
              n_pending = c.n_pending + v.p
         FROM unnest($3::int[], $4::int[], $5::int[], $6::int[]) AS v(g, n, a, p)
        WHERE c.run_id = $1 AND c.token = $2 AND c.job_group_id = v.g`,
      [
        runId,
        token,
        groups,
        [...perGroup.values()],
        groups.map((g) => alwaysRun.get(g) ?? 0),
        groups.map((g) => pending.get(g) ?? 0),
      ],
    );
  }

  /**
   * For each (run, group) asked and every ancestor of it, deduplicated: its counters summed, the cancellations over
   * it, its recorded status and state, and the run's stop reason; in one statement (one snapshot). `abortReason`
   * is the reason of a cancellation that is an abort.
   */
  async settleInputs(
    m: EntityManager,
    asked: { runId: string; jobGroupId: number }[],
    abortReason: string,
  ): Promise<SettleRow[]> {
    if (asked.length === 0) return [];
    return preparedQuery<SettleRow>(
      m,
      'job_groups_settle_inputs',
      `WITH asked AS (
         SELECT DISTINCT sa.run_id, sa.ancestor_id AS job_group_id
           FROM unnest($1::uuid[], $2::int[]) AS w(run_id, job_group_id)
           JOIN job_group_self_and_ancestors sa ON sa.run_id = w.run_id AND sa.job_group_id = w.job_group_id
       )
       SELECT a.run_id AS "runId", a.job_group_id AS "jobGroupId", g.status, g.state,
              o.cancelled, o.aborted, o.stop_reason AS "stopReason", s.*
         FROM asked a
         JOIN job_groups g ON g.run_id = a.run_id AND g.job_group_id = a.job_group_id
         CROSS JOIN LATERAL (
           SELECT count(x.run_id) > 0 AS cancelled, coalesce(bool_or(x.reason = $3), false) AS aborted,
                  max(x.reason) FILTER (WHERE x.job_group_id = 0) AS stop_reason
             FROM job_group_self_and_ancestors sa
             LEFT JOIN job_groups_cancelled x ON x.run_id = sa.run_id AND x.job_group_id = sa.ancestor_id
            WHERE sa.run_id = a.run_id AND sa.job_group_id = a.job_group_id
         ) o
         CROSS JOIN LATERAL (
           SELECT ${SUMMED_COUNTS}, ${SUMMED_ACTIVE} FROM job_group_counters c
            WHERE c.run_id = a.run_id AND c.job_group_id = a.job_group_id
         ) s
        ORDER BY a.run_id, a.job_group_id`,
      [asked.map((a) => a.runId), asked.map((a) => a.jobGroupId), abortReason],
    );
  }

  /** Every group's counters (summed), for the invariants check. */
  async allCounters(): Promise<(Counts & { runId: string; jobGroupId: number; nPending: number })[]> {
    return this.dataSource.query(
      `SELECT c.run_id AS "runId", c.job_group_id AS "jobGroupId", ${SUMMED_COUNTS}, sum(c.n_pending)::int AS "nPending"
         FROM job_group_counters c GROUP BY c.run_id, c.job_group_id`,
    );
  }

  /**
   * Groups whose counter rows disagree with job_groups_cancelled (a flag set where no cancellation is, or missing
   * where one is), or that do not have exactly COUNTER_TOKENS rows.
   */
  async rowMismatches(): Promise<{ runId: string; jobGroupId: number; rows: number; flags: string }[]> {
    return this.dataSource.query(
      `SELECT c.run_id AS "runId", c.job_group_id AS "jobGroupId", count(*)::int AS rows,
              string_agg(DISTINCT c.cancelled::text, ',') AS flags
         FROM job_group_counters c
         LEFT JOIN job_groups_cancelled x ON x.run_id = c.run_id AND x.job_group_id = c.job_group_id
        GROUP BY c.run_id, c.job_group_id, x.run_id
       HAVING count(*) <> $1 OR bool_or(c.cancelled <> (x.run_id IS NOT NULL))`,
      [COUNTER_TOKENS],
    );
  }

  async countsOf(
    runId: string,
    jobGroupId: number,
    m: EntityManager = this.dataSource.manager,
  ): Promise<(Counts & ActiveCounts) | null> {
    const [row] = await m.query(
      `SELECT ${SUMMED_COUNTS}, ${SUMMED_ACTIVE} FROM job_group_counters c
        WHERE c.run_id = $1 AND c.job_group_id = $2 GROUP BY c.job_group_id`,
      [runId, jobGroupId],
    );
    return row ?? null;
  }

  /**
   * Root counters and active counts of several runs, with whether any group of the run is cancelled: what a run
   * view's job_counts derive from (one index range of COUNTER_TOKENS rows per run, whatever the run holds).
   */
  async rootCountersOf(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<Map<string, Counts & ActiveCounts & { anyCancelled: boolean }>> {
    if (runIds.length === 0) return new Map();
    const rows: (Counts & ActiveCounts & { runId: string; anyCancelled: boolean })[] = await m.query(
      `SELECT c.run_id AS "runId", ${SUMMED_COUNTS}, ${SUMMED_ACTIVE},
              EXISTS (SELECT 1 FROM job_groups_cancelled x WHERE x.run_id = c.run_id) AS "anyCancelled"
         FROM job_group_counters c WHERE c.run_id = ANY($1::uuid[]) AND c.job_group_id = 0
        GROUP BY c.run_id`,
      [runIds],
    );
    return new Map(rows.map((r) => [r.runId, r]));
  }

  /** Jobs of these runs not finished yet (from their roots' counters). */
  async unfinishedJobs(m: EntityManager, runIds: string[]): Promise<number> {
    if (runIds.length === 0) return 0;
    const [row]: { n: string }[] = await m.query(
      `SELECT coalesce(sum(n_jobs - n_completed), 0) AS n FROM job_group_counters
         WHERE run_id = ANY($1::uuid[]) AND job_group_id = 0`,
      [runIds],
    );
    return Number(row.n);
  }

  /** Root counters, with the runs' active counts, of several runs at once. */
  async rootCounts(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<Map<string, Counts & ActiveCounts>> {
    if (runIds.length === 0) return new Map();
    const rows: (Counts & ActiveCounts & { runId: string })[] = await m.query(
      `SELECT c.run_id AS "runId", ${SUMMED_COUNTS}, ${SUMMED_ACTIVE} FROM job_group_counters c
         WHERE c.run_id = ANY($1::uuid[]) AND c.job_group_id = 0 GROUP BY c.run_id`,
      [runIds],
    );
    return new Map(rows.map((r) => [r.runId, r]));
  }

  async countersOfGroups(
    runId: string,
    groupIds: number[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<Map<number, Counts & { nPending: number }>> {
    if (groupIds.length === 0) return new Map();
    const rows: (Counts & { jobGroupId: number; nPending: number })[] = await m.query(
      `SELECT c.job_group_id AS "jobGroupId", ${SUMMED_COUNTS}, sum(c.n_pending)::int AS "nPending"
         FROM job_group_counters c
        WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[]) GROUP BY c.job_group_id`,
      [runId, groupIds],
    );
    return new Map(rows.map((r) => [r.jobGroupId, r]));
  }
}
