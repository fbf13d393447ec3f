import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { returning } from '../../infra/database/returning';
import {
  ACTIVE,
  type ActiveCounts,
  type ActiveDelta,
  type ChainLevel,
  COUNTS,
  type Counts,
  type CountsDelta,
} from './job-group-rows';

/**
 * Locks the counters of a group and all its ancestors, deepest first (root last, so the hottest row is held for
 * the shortest time). Every writer locks in this order, so two chains never deadlock. Locked rows are returned in
 * their latest committed version, so `cancelled` is exact even after waiting for the locks.
 */
const LOCK_CHAIN = `WITH locked AS (
  SELECT sa.ancestor_id AS "jobGroupId", sa.level, g.cancel_after_n_failures AS "cancelAfterNFailures", c.cancelled,
         c.n_jobs AS "nJobs", c.n_completed AS "nCompleted", c.n_succeeded AS "nSucceeded", c.n_failed AS "nFailed",
         c.n_cancelled AS "nCancelled", c.n_aborted AS "nAborted", c.n_provisioning AS "nProvisioning",
         c.n_running AS "nRunning", c.n_retrying AS "nRetrying", c.n_always_run_open AS "nAlwaysRunOpen",
         c.n_pending AS "nPending"
    FROM job_group_self_and_ancestors sa
    JOIN job_group_counters c ON c.run_id = sa.run_id AND c.job_group_id = sa.ancestor_id
    JOIN job_groups g ON g.run_id = sa.run_id AND g.job_group_id = sa.ancestor_id
   WHERE sa.run_id = $1 AND sa.job_group_id = $2
   ORDER BY sa.level
     FOR UPDATE OF c
)`;

/** lockChainAndCount's statement (see there). */
const LOCK_CHAIN_AND_COUNT = `${LOCK_CHAIN},
       verdict AS (SELECT NOT coalesce(bool_or(cancelled), false) AS counted FROM locked),
       updated AS (
         UPDATE job_group_counters c
            SET n_jobs = c.n_jobs + CASE WHEN v.counted THEN $3 ELSE 0 END,
                n_completed = c.n_completed + CASE WHEN v.counted THEN $4 ELSE 0 END,
                n_succeeded = c.n_succeeded + CASE WHEN v.counted THEN $5 ELSE 0 END,
                n_failed = c.n_failed + CASE WHEN v.counted THEN $6 ELSE 0 END,
                n_cancelled = c.n_cancelled + CASE WHEN v.counted THEN $7 ELSE 0 END,
                n_aborted = c.n_aborted + CASE WHEN v.counted THEN $11 ELSE 0 END,
                n_always_run_open = c.n_always_run_open + CASE WHEN v.counted THEN $12 ELSE 0 END,
                n_provisioning = c.n_provisioning + CASE WHEN c.job_group_id = 0 THEN $8 ELSE 0 END,
                n_running = c.n_running + CASE WHEN c.job_group_id = 0 THEN $9 ELSE 0 END,
                n_retrying = c.n_retrying + CASE WHEN c.job_group_id = 0 THEN $10 ELSE 0 END,
                n_pending = c.n_pending + CASE WHEN c.job_group_id = 0 THEN $13 ELSE 0 END
           FROM locked l, verdict v
          WHERE (v.counted OR l."jobGroupId" = 0) AND c.run_id = $1 AND c.job_group_id = l."jobGroupId"
      RETURNING c.job_group_id AS "jobGroupId", ${COUNTS}, ${ACTIVE}
       )
       SELECT l."jobGroupId", l.level, l."cancelAfterNFailures", l.cancelled, v.counted,
              coalesce(u."nJobs", l."nJobs") AS "nJobs", coalesce(u."nCompleted", l."nCompleted") AS "nCompleted",
              coalesce(u."nSucceeded", l."nSucceeded") AS "nSucceeded", coalesce(u."nFailed", l."nFailed") AS "nFailed",
              coalesce(u."nCancelled", l."nCancelled") AS "nCancelled",
              coalesce(u."nAborted", l."nAborted") AS "nAborted",
              coalesce(u."nAlwaysRunOpen", l."nAlwaysRunOpen") AS "nAlwaysRunOpen",
              coalesce(u."nProvisioning", l."nProvisioning") AS "nProvisioning",
              coalesce(u."nRunning", l."nRunning") AS "nRunning", coalesce(u."nRetrying", l."nRetrying") AS "nRetrying",
              coalesce(u."nPending", l."nPending") AS "nPending"
         FROM locked l CROSS JOIN verdict v LEFT JOIN updated u ON u."jobGroupId" = l."jobGroupId"
        ORDER BY l.level`;

/** The groups' counters rows: chain and cascade locking, counting, the run's active counts, and their reads. */
@Injectable()
export class JobGroupCountersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** See LOCK_CHAIN. */
  async lockChain(m: EntityManager, runId: string, jobGroupId: number): Promise<ChainLevel[]> {
    return m.query(`${LOCK_CHAIN} SELECT * FROM locked ORDER BY level`, [runId, jobGroupId]);
  }

  /**
   * lockChain and, unless a locked level is cancelled, counting `d` into every level, in one statement (one round
   * trip while the chain's hottest rows are held); the run's active counts on the root move by `active` either way.
   * Returns the levels as they stand afterwards and whether `d` was counted.
   */
  async lockChainAndCount(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    d: CountsDelta,
    active: ActiveDelta,
  ): Promise<{ levels: ChainLevel[]; counted: boolean }> {
    const rows = await preparedQuery<ChainLevel & { counted: boolean }>(
      m,
      'job_groups_lock_chain_and_count',
      LOCK_CHAIN_AND_COUNT,
      [
        runId,
        jobGroupId,
        d.nJobs ?? 0,
        d.nCompleted ?? 0,
        d.nSucceeded ?? 0,
        d.nFailed ?? 0,
        d.nCancelled ?? 0,
        active.nProvisioning ?? 0,
        active.nRunning ?? 0,
        active.nRetrying ?? 0,
        d.nAborted ?? 0,
        d.nAlwaysRunOpen ?? 0,
        active.nPending ?? 0,
      ],
    );
    return {
      // eslint-disable-next-line @typescript-eslint/no-unused-vars -- `_` drops `counted` from the levels
      levels: rows.map(({ counted: _, ...level }) => level),
      counted: rows[0]?.counted ?? false,
    };
  }

  /** Moves the run's active counts on its root counters row (locking it); the row as it stands afterwards. */
  async moveActive(
    m: EntityManager,
    runId: string,
    d: ActiveDelta,
  ): Promise<Counts & ActiveCounts & { cancelled: boolean }> {
    const [row] = await preparedQuery<Counts & ActiveCounts & { cancelled: boolean }>(
      m,
      'job_groups_move_active',
      `UPDATE job_group_counters c SET n_provisioning = c.n_provisioning + $2, n_running = c.n_running + $3,
         n_retrying = c.n_retrying + $4, n_pending = c.n_pending + $5
        WHERE c.run_id = $1 AND c.job_group_id = 0
        RETURNING ${COUNTS}, ${ACTIVE}, c.cancelled`,
      [runId, d.nProvisioning ?? 0, d.nRunning ?? 0, d.nRetrying ?? 0, d.nPending ?? 0],
    );
    if (!row) throw new Error(`run ${runId} has no job group 0`);
    return row;
  }

  async markCancelled(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    await m.query(`UPDATE job_group_counters SET cancelled = true WHERE run_id = $1 AND job_group_id = $2`, [
      runId,
      jobGroupId,
    ]);
  }

  /** Adds `d` to each of `groupIds`, and `pending` to their jobs waiting for parents. */
  async addCounts(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    d: CountsDelta,
    pending = 0,
  ): Promise<(Counts & { jobGroupId: number })[]> {
    if (groupIds.length === 0) return [];
    return returning(
      m,
      `UPDATE job_group_counters c
          SET n_jobs = n_jobs + $3, n_completed = n_completed + $4, n_succeeded = n_succeeded + $5,
              n_failed = n_failed + $6, n_cancelled = n_cancelled + $7, n_aborted = n_aborted + $8,
              n_always_run_open = n_always_run_open + $9, n_pending = n_pending + $10
        WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[])
        RETURNING c.job_group_id AS "jobGroupId", ${COUNTS}`,
      [
        runId,
        groupIds,
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
   * Locks the counters of several groups and all their ancestors in one statement, in the one total order every
   * chain lock agrees with (depth descending, then group id; the root last): a cascade across many groups never
   * deadlocks with a chain. Returns each locked row (with its own cancelled flag) and the closure of `groupIds`.
   * Without `withRoot`, the root is left for the caller's own write of it (it is locked last, LOCK_ORDER).
   */
  async lockGroups(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    withRoot = true,
  ): Promise<{
    rows: (Counts & { jobGroupId: number; cancelled: boolean })[];
    closure: { jobGroupId: number; ancestorId: number }[];
  }> {
    const closure: { jobGroupId: number; ancestorId: number }[] = await m.query(
      `SELECT job_group_id AS "jobGroupId", ancestor_id AS "ancestorId" FROM job_group_self_and_ancestors
        WHERE run_id = $1 AND job_group_id = ANY($2::int[])`,
      [runId, groupIds],
    );
    const rows = await m.query(
      `SELECT c.job_group_id AS "jobGroupId", c.cancelled, ${COUNTS}
         FROM job_group_counters c JOIN job_groups g ON g.run_id = c.run_id AND g.job_group_id = c.job_group_id
        WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[])
        ORDER BY g.depth DESC, c.job_group_id
          FOR UPDATE OF c`,
      [runId, [...new Set(closure.map((c) => c.ancestorId))].filter((id) => withRoot || id !== 0)],
    );
    return { rows, closure };
  }

  /**
   * Adds per-group deltas of completed-and-cancelled jobs and of jobs waiting for parents (already locked rows): one
   * statement. Returns the rows as they stand afterwards.
   */
  async addCascadeCounts(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, { cancelled: number; pending: number }>,
  ): Promise<(Counts & { jobGroupId: number })[]> {
    if (perGroup.size === 0) return [];
    const values = [...perGroup.values()];
    return returning(
      m,
      `UPDATE job_group_counters c SET n_completed = c.n_completed + v.n, n_cancelled = c.n_cancelled + v.n,
              n_pending = c.n_pending + v.p
         FROM unnest($2::int[], $3::int[], $4::int[]) AS v(g, n, p)
        WHERE c.run_id = $1 AND c.job_group_id = v.g
        RETURNING c.job_group_id AS "jobGroupId", ${COUNTS}`,
      [runId, [...perGroup.keys()], values.map((v) => v.cancelled), values.map((v) => v.pending)],
    );
  }

  /**
   * Adds `n` jobs (`a` of them always_run, `p` waiting for parents) to many groups at once (run submission): one
   * statement.
   */
  async addJobCounts(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
    alwaysRun: Map<number, number> = new Map(),
    pending: Map<number, number> = new Map(),
  ): Promise<void> {
    if (perGroup.size === 0) return;
    const groups = [...perGroup.keys()];
    await m.query(
      `UPDATE job_group_counters c SET n_jobs = c.n_jobs + v.n, n_always_run_open = c.n_always_run_open + v.a,
              n_pending = c.n_pending + v.p
         FROM unnest($2::int[], $3::int[], $4::int[], $5::int[]) AS v(g, n, a, p)
        WHERE c.run_id = $1 AND c.job_group_id = v.g`,
      [
        runId,
        groups,
        [...perGroup.values()],
        groups.map((g) => alwaysRun.get(g) ?? 0),
        groups.map((g) => pending.get(g) ?? 0),
      ],
    );
  }

  /** Every group's counters, for the invariants check. */
  async allCounters(): Promise<(Counts & { runId: string; jobGroupId: number; nPending: number })[]> {
    return this.dataSource.query(
      `SELECT c.run_id AS "runId", c.job_group_id AS "jobGroupId", ${COUNTS}, c.n_pending AS "nPending"
         FROM job_group_counters c`,
    );
  }

  /** Counter rows whose cancelled flag disagrees with job_groups_cancelled. */
  async cancelledFlagMismatches(): Promise<{ runId: string; jobGroupId: number; flag: boolean }[]> {
    return this.dataSource.query(
      `SELECT c.run_id AS "runId", c.job_group_id AS "jobGroupId", c.cancelled AS flag
         FROM job_group_counters c
         LEFT JOIN job_groups_cancelled x ON x.run_id = c.run_id AND x.job_group_id = c.job_group_id
        WHERE c.cancelled <> (x.run_id IS NOT NULL)`,
    );
  }

  async countsOf(
    runId: string,
    jobGroupId: number,
    m: EntityManager = this.dataSource.manager,
  ): Promise<(Counts & ActiveCounts) | null> {
    const [row] = await m.query(
      `SELECT ${COUNTS}, ${ACTIVE} FROM job_group_counters c WHERE c.run_id = $1 AND c.job_group_id = $2`,
      [runId, jobGroupId],
    );
    return row ?? null;
  }

  /**
   * Root counters and active counts of several runs, with whether any group of the run is cancelled: what a run
   * view's job_counts derive from (one index read per run, whatever the run holds).
   */
  async rootCountersOf(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
  ): Promise<Map<string, Counts & ActiveCounts & { anyCancelled: boolean }>> {
    if (runIds.length === 0) return new Map();
    const rows: (Counts & ActiveCounts & { runId: string; anyCancelled: boolean })[] = await m.query(
      `SELECT c.run_id AS "runId", ${COUNTS}, ${ACTIVE},
              EXISTS (SELECT 1 FROM job_groups_cancelled x WHERE x.run_id = c.run_id) AS "anyCancelled"
         FROM job_group_counters c WHERE c.run_id = ANY($1::uuid[]) AND c.job_group_id = 0`,
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

  /** Root counters, with the runs' active counts, of several runs at once (invariants check). */
  async rootCounts(runIds: string[]): Promise<Map<string, Counts & ActiveCounts>> {
    if (runIds.length === 0) return new Map();
    const rows: (Counts & ActiveCounts & { runId: string })[] = await this.dataSource.query(
      `SELECT c.run_id AS "runId", ${COUNTS}, ${ACTIVE} FROM job_group_counters c
         WHERE c.run_id = ANY($1::uuid[]) AND c.job_group_id = 0`,
      [runIds],
    );
    return new Map(rows.map((r) => [r.runId, r]));
  }

  async countersOfGroups(runId: string, groupIds: number[]): Promise<Map<number, Counts & { nPending: number }>> {
    if (groupIds.length === 0) return new Map();
    const rows: (Counts & { jobGroupId: number; nPending: number })[] = await this.dataSource.query(
      `SELECT c.job_group_id AS "jobGroupId", ${COUNTS}, c.n_pending AS "nPending" FROM job_group_counters c
         WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[])`,
      [runId, groupIds],
    );
    return new Map(rows.map((r) => [r.jobGroupId, r]));
  }
}
