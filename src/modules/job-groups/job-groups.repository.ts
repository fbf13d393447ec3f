import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { returning } from '../../infra/database/returning';
import { type StatementRider, withRider } from '../../infra/database/rider';
import type { Cancellation } from './dto/job-group.dto';
import { JobGroup } from './entities/job-group.entity';
import { required } from '../../common/required';

export interface NewGroup {
  jobGroupId: number;
  parentId: number | null;
  depth: number;
  attributes: Record<string, unknown>;
  cancelAfterNFailures: number | null;
}

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

/** The run's active counts, kept on its root group's counters row (zero on every other group). */
export interface ActiveCounts {
  nProvisioning: number;
  nRunning: number;
  nRetrying: number;
  /** The run's jobs waiting for their parents (status `pending`). */
  nPending: number;
}

export type ActiveDelta = Partial<ActiveCounts>;

export interface ChainLevel extends Counts, ActiveCounts {
  jobGroupId: number;
  level: number;
  cancelAfterNFailures: number | null;
  /** The group itself is cancelled (read from the locked, latest row version). */
  cancelled: boolean;
}

export type CountsDelta = Partial<Counts>;

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

const COUNTS = `c.n_jobs AS "nJobs", c.n_completed AS "nCompleted", c.n_succeeded AS "nSucceeded",
                c.n_failed AS "nFailed", c.n_cancelled AS "nCancelled", c.n_aborted AS "nAborted",
                c.n_always_run_open AS "nAlwaysRunOpen"`;
const ACTIVE = `c.n_provisioning AS "nProvisioning", c.n_running AS "nRunning", c.n_retrying AS "nRetrying",
                c.n_pending AS "nPending"`;
const CANCELLATION = `x.job_group_id AS "jobGroupId", x.cancelled_at AS "cancelledAt", x.cancelled_by AS "cancelledBy",
                      x.reason`;

@Injectable()
export class JobGroupsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Inserts groups with their closure rows and zeroed counters. `ancestors` maps a group to its [self, parent, ...].
   */
  async insertGroups(
    m: EntityManager,
    runId: string,
    groups: NewGroup[],
    ancestors: Map<number, number[]>,
  ): Promise<void> {
    if (groups.length === 0) return;
    await m.query(
      `INSERT INTO job_groups (run_id, job_group_id, parent_id, depth, attributes, cancel_after_n_failures)
       SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[], $5::jsonb[], $6::int[])`,
      [
        runId,
        groups.map((g) => g.jobGroupId),
        groups.map((g) => g.parentId),
        groups.map((g) => g.depth),
        groups.map((g) => JSON.stringify(g.attributes)),
        groups.map((g) => g.cancelAfterNFailures),
      ],
    );
    const closure = groups.flatMap((g) =>
      required(ancestors.get(g.jobGroupId), `the ancestors of group ${g.jobGroupId}`).map((a, level) => [
        g.jobGroupId,
        a,
        level,
      ]),
    );
    await m.query(
      `INSERT INTO job_group_self_and_ancestors (run_id, job_group_id, ancestor_id, level)
       SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[])`,
      [runId, closure.map((r) => r[0]), closure.map((r) => r[1]), closure.map((r) => r[2])],
    );
    await m.query(`INSERT INTO job_group_counters (run_id, job_group_id) SELECT $1, unnest($2::int[])`, [
      runId,
      groups.map((g) => g.jobGroupId),
    ]);
  }

  async nextGroupId(m: EntityManager, runId: string): Promise<number> {
    const [row] = await m.query(`SELECT coalesce(max(job_group_id), 0) + 1 AS next FROM job_groups WHERE run_id = $1`, [
      runId,
    ]);
    return Number(row.next);
  }

  findGroup(runId: string, jobGroupId: number, m: EntityManager = this.dataSource.manager): Promise<JobGroup | null> {
    return m.getRepository(JobGroup).findOneBy({ runId, jobGroupId });
  }

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
    rider?: StatementRider,
  ): Promise<{ levels: ChainLevel[]; counted: boolean }> {
    const q = withRider(
      'job_groups_lock_chain_and_count',
      `${LOCK_CHAIN},
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
       )`,
      `SELECT l."jobGroupId", l.level, l."cancelAfterNFailures", l.cancelled, v.counted,
              coalesce(u."nJobs", l."nJobs") AS "nJobs", coalesce(u."nCompleted", l."nCompleted") AS "nCompleted",
              coalesce(u."nSucceeded", l."nSucceeded") AS "nSucceeded", coalesce(u."nFailed", l."nFailed") AS "nFailed",
              coalesce(u."nCancelled", l."nCancelled") AS "nCancelled",
              coalesce(u."nAborted", l."nAborted") AS "nAborted",
              coalesce(u."nAlwaysRunOpen", l."nAlwaysRunOpen") AS "nAlwaysRunOpen",
              coalesce(u."nProvisioning", l."nProvisioning") AS "nProvisioning",
              coalesce(u."nRunning", l."nRunning") AS "nRunning", coalesce(u."nRetrying", l."nRetrying") AS "nRetrying",
              coalesce(u."nPending", l."nPending") AS "nPending"
         FROM locked l CROSS JOIN verdict v LEFT JOIN updated u ON u."jobGroupId" = l."jobGroupId"
        ORDER BY l.level`,
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
      rider,
    );
    const rows = await preparedQuery<ChainLevel & { counted: boolean }>(m, q.name, q.text, q.params);
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

  /** Direct cancellations of a group or any ancestor, earliest first. */
  async chainCancellations(
    runId: string,
    jobGroupId: number,
    m: EntityManager = this.dataSource.manager,
  ): Promise<Cancellation[]> {
    return m.query(
      `SELECT ${CANCELLATION}
         FROM job_group_self_and_ancestors sa
         JOIN job_groups_cancelled x ON x.run_id = sa.run_id AND x.job_group_id = sa.ancestor_id
        WHERE sa.run_id = $1 AND sa.job_group_id = $2
        ORDER BY x.cancelled_at, sa.level DESC`,
      [runId, jobGroupId],
    );
  }

  /** For every group of the given runs that lies under a cancelled group: the earliest such cancellation. */
  async effectiveCancellations(
    runIds: string[],
    m: EntityManager = this.dataSource.manager,
    reason: string | null = null,
  ): Promise<(Cancellation & { runId: string; groupId: number })[]> {
    if (runIds.length === 0) return [];
    return m.query(
      `SELECT DISTINCT ON (sa.run_id, sa.job_group_id) sa.run_id AS "runId", sa.job_group_id AS "groupId",
         ${CANCELLATION}
         FROM job_groups_cancelled x
         JOIN job_group_self_and_ancestors sa ON sa.run_id = x.run_id AND sa.ancestor_id = x.job_group_id
        WHERE x.run_id = ANY($1::uuid[]) AND ($2::text IS NULL OR x.reason = $2)
        ORDER BY sa.run_id, sa.job_group_id, x.cancelled_at, sa.level DESC`,
      [runIds, reason],
    );
  }

  /** Adds `d` to each of `groupIds`, and `rootPending` to the run's pending jobs (on the root, if among them). */
  async addCounts(
    m: EntityManager,
    runId: string,
    groupIds: number[],
    d: CountsDelta,
    rootPending = 0,
  ): Promise<(Counts & { jobGroupId: number })[]> {
    if (groupIds.length === 0) return [];
    return returning(
      m,
      `UPDATE job_group_counters c
          SET n_jobs = n_jobs + $3, n_completed = n_completed + $4, n_succeeded = n_succeeded + $5,
              n_failed = n_failed + $6, n_cancelled = n_cancelled + $7, n_aborted = n_aborted + $8,
              n_always_run_open = n_always_run_open + $9,
              n_pending = n_pending + CASE WHEN c.job_group_id = 0 THEN $10::int ELSE 0 END
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
        rootPending,
      ],
    );
  }

  /**
   * Locks the counters of several groups and all their ancestors in one statement, in the one total order every
   * chain lock agrees with (depth descending, then group id; the root last): a cascade across many groups never
   * deadlocks with a chain. Returns each locked row (with its own cancelled flag) and the closure of `groupIds`.
   */
  async lockGroups(
    m: EntityManager,
    runId: string,
    groupIds: number[],
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
      [runId, [...new Set(closure.map((c) => c.ancestorId))]],
    );
    return { rows, closure };
  }

  /** Adds per-group deltas of completed-and-cancelled jobs (already locked rows): one statement. */
  async addCancelledCounts(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
  ): Promise<(Counts & { jobGroupId: number })[]> {
    if (perGroup.size === 0) return [];
    return returning(
      m,
      `UPDATE job_group_counters c SET n_completed = c.n_completed + v.n, n_cancelled = c.n_cancelled + v.n
         FROM unnest($2::int[], $3::int[]) AS v(g, n)
        WHERE c.run_id = $1 AND c.job_group_id = v.g
        RETURNING c.job_group_id AS "jobGroupId", ${COUNTS}`,
      [runId, [...perGroup.keys()], [...perGroup.values()]],
    );
  }

  /**
   * Adds `n` jobs (`a` of them always_run) to many groups at once (run submission), and `rootPending` jobs waiting
   * for parents to the run's root: one statement.
   */
  async addJobCounts(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
    alwaysRun: Map<number, number> = new Map(),
    rootPending = 0,
  ): Promise<void> {
    if (perGroup.size === 0) return;
    const groups = [...perGroup.keys()];
    await m.query(
      `UPDATE job_group_counters c SET n_jobs = c.n_jobs + v.n, n_always_run_open = c.n_always_run_open + v.a,
              n_pending = c.n_pending + CASE WHEN c.job_group_id = 0 THEN $5::int ELSE 0 END
         FROM unnest($2::int[], $3::int[], $4::int[]) AS v(g, n, a)
        WHERE c.run_id = $1 AND c.job_group_id = v.g`,
      [runId, groups, [...perGroup.values()], groups.map((g) => alwaysRun.get(g) ?? 0), rootPending],
    );
  }

  async setState(m: EntityManager, runId: string, groupIds: number[], state: 'running' | 'complete'): Promise<void> {
    if (groupIds.length === 0) return;
    await m.query(
      `UPDATE job_groups SET state = $3 WHERE run_id = $1 AND job_group_id = ANY($2::int[]) AND state <> $3`,
      [runId, groupIds, state],
    );
  }

  async insertCancellation(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    by: string,
    reason: string,
  ): Promise<Cancellation> {
    const [row] = await m.query(
      `INSERT INTO job_groups_cancelled AS x (run_id, job_group_id, cancelled_by, reason) VALUES ($1, $2, $3, $4)
       RETURNING ${CANCELLATION}`,
      [runId, jobGroupId, by, reason],
    );
    return row;
  }

  async unswept(limit: number): Promise<(Cancellation & { runId: string })[]> {
    return this.dataSource.query(
      `SELECT x.run_id AS "runId", ${CANCELLATION} FROM job_groups_cancelled x
         WHERE x.swept_at IS NULL ORDER BY x.cancelled_at LIMIT $1`,
      [limit],
    );
  }

  async markSwept(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    await m.query(`UPDATE job_groups_cancelled SET swept_at = now() WHERE run_id = $1 AND job_group_id = $2`, [
      runId,
      jobGroupId,
    ]);
  }

  /** Every group's counters, for the invariants check. */
  async allCounters(): Promise<(Counts & { runId: string; jobGroupId: number })[]> {
    return this.dataSource.query(
      `SELECT c.run_id AS "runId", c.job_group_id AS "jobGroupId", ${COUNTS} FROM job_group_counters c`,
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

  async allClosure(): Promise<{ runId: string; jobGroupId: number; ancestorId: number }[]> {
    return this.dataSource.query(
      `SELECT run_id AS "runId", job_group_id AS "jobGroupId", ancestor_id AS "ancestorId"
         FROM job_group_self_and_ancestors`,
    );
  }

  async cancelledRunIds(): Promise<string[]> {
    return (await this.dataSource.query(`SELECT DISTINCT run_id AS "runId" FROM job_groups_cancelled`)).map(
      (r: { runId: string }) => r.runId,
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

  /** Root counters, with the runs' active counts, of several runs at once (invariants check). */
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

  async rootCounts(runIds: string[]): Promise<Map<string, Counts & ActiveCounts>> {
    if (runIds.length === 0) return new Map();
    const rows: (Counts & ActiveCounts & { runId: string })[] = await this.dataSource.query(
      `SELECT c.run_id AS "runId", ${COUNTS}, ${ACTIVE} FROM job_group_counters c
         WHERE c.run_id = ANY($1::uuid[]) AND c.job_group_id = 0`,
      [runIds],
    );
    return new Map(rows.map((r) => [r.runId, r]));
  }

  async children(runId: string, parentId: number, after: number | undefined, limit: number): Promise<JobGroup[]> {
    const qb = this.dataSource
      .getRepository(JobGroup)
      .createQueryBuilder('g')
      .where('g.run_id = :runId AND g.parent_id = :parentId', { runId, parentId });
    if (after !== undefined) qb.andWhere('g.job_group_id > :after', { after });
    return qb.orderBy('g.job_group_id', 'ASC').limit(limit).getMany();
  }

  async countersOfGroups(runId: string, groupIds: number[]): Promise<Map<number, Counts>> {
    if (groupIds.length === 0) return new Map();
    const rows: (Counts & { jobGroupId: number })[] = await this.dataSource.query(
      `SELECT c.job_group_id AS "jobGroupId", ${COUNTS} FROM job_group_counters c
         WHERE c.run_id = $1 AND c.job_group_id = ANY($2::int[])`,
      [runId, groupIds],
    );
    return new Map(rows.map((r) => [r.jobGroupId, r]));
  }

  /** The group and all its ancestors (0 included), without locking anything: the closure rows never change. */
  async selfAndAncestorIds(m: EntityManager, runId: string, jobGroupId: number): Promise<number[]> {
    const rows: { id: number }[] = await m.query(
      `SELECT ancestor_id AS id FROM job_group_self_and_ancestors
         WHERE run_id = $1 AND job_group_id = $2 ORDER BY level`,
      [runId, jobGroupId],
    );
    return rows.map((r) => r.id);
  }

  /** The group and every descendant. */
  async subtreeIds(runId: string, jobGroupId: number, m: EntityManager = this.dataSource.manager): Promise<number[]> {
    const rows: { id: number }[] = await m.query(
      `SELECT job_group_id AS id FROM job_group_self_and_ancestors WHERE run_id = $1 AND ancestor_id = $2`,
      [runId, jobGroupId],
    );
    return rows.map((r) => r.id);
  }
}
