import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import { COUNTER_TOKENS } from './counter-tokens';
import type { JobGroupState, StoredGroupStatus } from './entities/job-group.entity';
import { type ActiveCounts, type Counts, SUMMED_ACTIVE, SUMMED_COUNTS } from './job-group-rows';

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

/**
 * The counter rows of groups, read: a group's counts are the sum of its COUNTER_TOKENS rows, read in one snapshot
 * (one index range of a few rows per group).
 */
@Injectable()
export class JobGroupCounterReadsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

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
