import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { COUNTER_TOKENS } from './counter-tokens';
import {
  ACTIVE,
  type ActiveCounts,
  type ActiveDelta,
  activeDeltaParams,
  type ChainLevel,
  COUNTS,
  type Counts,
  type CountsDelta,
  countsDeltaParams,
  NO_COUNTS,
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

/**
 * The one-row subquery a counting statement's result is driven from (so that it is evaluated even when nothing was
 * locked): with `strict` (the statement is its transaction's last, COMMIT queued behind it: commit-ahead.ts) it
 * refuses where the caller would have more to do: jobs a cancelled level leaves out (`uncounted`), failures counted
 * on a level with fail-fast (`failures`: its threshold is the caller's to check, and a cancellation to make), or a
 * chain gone (no root row locked).
 */
function refusal(strict: string, uncounted: string, failures: string): string {
  return `SELECT CASE WHEN ${strict}
                       AND ((${uncounted}) OR NOT EXISTS (SELECT 1 FROM locked WHERE "jobGroupId" = 0)
                            OR (${failures} AND EXISTS (SELECT 1 FROM locked WHERE "cancelAfterNFailures" IS NOT NULL)))
                      THEN runplane_refuse_commit_ahead('jobs left uncounted, fail-fast to check, or the chain is gone')
                  END AS refused`;
}

/** The rows a refusal-driven statement returns for what it locked (none: its one row is all nulls). */
const lockedOnly = <R extends { jobGroupId: number | null }>(rows: R[]): R[] =>
  rows.filter((r) => r.jobGroupId !== null);

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
              coalesce(u."nPending", l."nPending") AS "nPending", chk.refused
         FROM (${refusal('$17', 'NOT (SELECT counted FROM verdict)', '$5')}) chk
         LEFT JOIN (locked l CROSS JOIN verdict v
                    LEFT JOIN updated u ON u."jobGroupId" = l."jobGroupId" AND u.token = l.token) ON true
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
  const s = { ...NO_COUNTS };
  for (const r of rows) for (const k of Object.keys(s) as (keyof typeof s)[]) s[k] = (s[k] ?? 0) + Number(r[k] ?? 0);
  return s;
}

/**
 * The counter rows of groups, locked: chain and cascade locking, and the counting of outcomes on a transaction's
 * token rows. Deltas added to locked rows: JobGroupCounterDeltasRepository; summed reads:
 * JobGroupCounterReadsRepository.
 */
@Injectable()
export class JobGroupCountersRepository {
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
   * they stand afterwards (sums where locked whole) and whether `d` was counted. With `commitAfter` the statement is
   * its transaction's last (COMMIT queued behind it): it refuses, rather than answer not counted or nothing locked,
   * or count failures (`failFastExact`) on a chain with fail-fast.
   */
  async lockChainAndCount(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    token: number,
    d: CountsDelta,
    active: ActiveDelta,
    failFastExact: boolean,
    commitAfter = false,
  ): Promise<{ levels: ChainLevel[]; counted: boolean }> {
    const found = await preparedQuery<LockedRow & { counted: boolean }>(
      m,
      'job_groups_lock_chain_and_count',
      LOCK_CHAIN_AND_COUNT,
      [runId, jobGroupId, token, [], failFastExact, ...countsDeltaParams(d), ...activeDeltaParams(active), commitAfter],
      { commitAfter },
    );
    const rows = lockedOnly(found);
    return { levels: toLevels(rows), counted: rows[0]?.counted ?? false };
  }

  /**
   * Outcomes of jobs in several groups of a run, counted in one statement: locks the token's rows of every group's
   * chain (the groups and their ancestors), and with `failFastExact` every row of the levels with fail-fast, in the
   * one order every counter lock follows (depth descending, group, token); each group's outcomes (`perGroup`,
   * already summed per group) go into the token's row of every level of its chain unless a level of its chain is
   * cancelled (that cancellation counted them); `active` moves the run's active counts on the root's token row either
   * way. Returns the locked rows as they were before (which of the groups lie below each), and the groups not counted.
   * With `commitAfter`, the transaction's last statement (as lockChainAndCount's): it refuses rather than leave any
   * group uncounted, lock no root row, or count failures (`failFastExact`) on a level with fail-fast.
   */
  async countChains(
    m: EntityManager,
    runId: string,
    token: number,
    perGroup: ReadonlyMap<number, CountsDelta>,
    active: ActiveDelta,
    failFastExact: boolean,
    commitAfter = false,
  ): Promise<{ rows: (LockedRow & { below: number[] })[]; uncounted: number[] }> {
    const groups = [...perGroup.keys()];
    const at = (k: keyof CountsDelta) => groups.map((g) => perGroup.get(g)?.[k] ?? 0);
    const found = await preparedQuery<LockedRow & { below: number[]; uncounted: number[] }>(
      m,
      'job_groups_count_chains',
      `WITH asked AS (
         SELECT * FROM unnest($2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], $8::int[])
           AS a(g, completed, succeeded, failed, cancelled, aborted, open)
       ), chains AS (
         SELECT sa.job_group_id AS g, sa.ancestor_id AS level FROM job_group_self_and_ancestors sa
          WHERE sa.run_id = $1 AND sa.job_group_id = ANY($2::int[])
       ), locked AS (
         SELECT c.job_group_id AS "jobGroupId", g.depth AS level, c.token,
                g.cancel_after_n_failures AS "cancelAfterNFailures", c.cancelled, ${COUNTS}, ${ACTIVE}
           FROM job_group_counters c JOIN job_groups g ON g.run_id = c.run_id AND g.job_group_id = c.job_group_id
          WHERE c.run_id = $1 AND c.job_group_id IN (SELECT level FROM chains)
            AND (c.token = $9 OR ($10 AND g.cancel_after_n_failures IS NOT NULL))
          ORDER BY g.depth DESC, c.job_group_id, c.token
            FOR UPDATE OF c
       ), verdict AS (
         SELECT ch.g, NOT bool_or(l.cancelled) AS counted
           FROM chains ch JOIN locked l ON l."jobGroupId" = ch.level GROUP BY ch.g
       ), deltas AS (
         SELECT ch.level, sum(a.completed) AS completed, sum(a.succeeded) AS succeeded, sum(a.failed) AS failed,
                sum(a.cancelled) AS cancelled, sum(a.aborted) AS aborted, sum(a.open) AS open
           FROM asked a JOIN verdict v ON v.g = a.g AND v.counted JOIN chains ch ON ch.g = a.g
          GROUP BY ch.level
       ), updated AS (
         UPDATE job_group_counters c
            SET n_completed = c.n_completed + coalesce(d.completed, 0),
                n_succeeded = c.n_succeeded + coalesce(d.succeeded, 0),
                n_failed = c.n_failed + coalesce(d.failed, 0), n_cancelled = c.n_cancelled + coalesce(d.cancelled, 0),
                n_aborted = c.n_aborted + coalesce(d.aborted, 0),
                n_always_run_open = c.n_always_run_open + coalesce(d.open, 0),
                n_provisioning = c.n_provisioning + CASE WHEN c.job_group_id = 0 THEN $11 ELSE 0 END,
                n_running = c.n_running + CASE WHEN c.job_group_id = 0 THEN $12 ELSE 0 END,
                n_retrying = c.n_retrying + CASE WHEN c.job_group_id = 0 THEN $13 ELSE 0 END,
                n_pending = c.n_pending + CASE WHEN c.job_group_id = 0 THEN $14 ELSE 0 END
           FROM (SELECT level FROM deltas UNION SELECT 0) t LEFT JOIN deltas d ON d.level = t.level
          WHERE c.run_id = $1 AND c.token = $9 AND c.job_group_id = t.level
      RETURNING c.job_group_id
       )
       SELECT l.*, (SELECT array_agg(ch.g) FROM chains ch WHERE ch.level = l."jobGroupId") AS below,
              (SELECT coalesce(array_agg(v.g), '{}') FROM verdict v WHERE NOT v.counted) AS uncounted,
              (SELECT count(*) FROM updated) AS written, chk.refused
         FROM (${refusal('$15', 'EXISTS (SELECT 1 FROM verdict WHERE NOT counted)', '$10')}) chk
         LEFT JOIN locked l ON true
        ORDER BY l.level DESC, l."jobGroupId", l.token`,
      [
        runId,
        groups,
        at('nCompleted'),
        at('nSucceeded'),
        at('nFailed'),
        at('nCancelled'),
        at('nAborted'),
        at('nAlwaysRunOpen'),
        token,
        failFastExact,
        ...activeDeltaParams(active),
        commitAfter,
      ],
      { commitAfter },
    );
    const rows = lockedOnly(found);
    return {
      // eslint-disable-next-line @typescript-eslint/no-unused-vars -- `_` drops the statement-wide column
      rows: rows.map(({ uncounted: _, ...row }) => row),
      uncounted: found[0]?.uncounted ?? [],
    };
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
}
