import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { type ActiveDelta, activeDeltaParams, type CountsDelta, countsDeltaParams } from './job-group-rows';

/**
 * Deltas added to group counter rows on one token: jobs added, finished, cancelled in a cascade, and the run's active
 * counts. Callers keep LOCK_ORDER (lock-order.ts): a chain's rows locked first (JobGroupCountersRepository), the
 * root's row last.
 */
@Injectable()
export class JobGroupCounterDeltasRepository {
  /** Moves the run's active counts on the root's row of `token`. */
  async moveActive(m: EntityManager, runId: string, token: number, d: ActiveDelta): Promise<void> {
    await preparedQuery(
      m,
      'job_groups_move_active',
      `UPDATE job_group_counters c SET n_provisioning = c.n_provisioning + $3, n_running = c.n_running + $4,
         n_retrying = c.n_retrying + $5, n_pending = c.n_pending + $6
        WHERE c.run_id = $1 AND c.job_group_id = 0 AND c.token = $2`,
      [runId, token, ...activeDeltaParams(d)],
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
      [runId, groupIds, token, ...countsDeltaParams(d), pending],
    );
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
}
