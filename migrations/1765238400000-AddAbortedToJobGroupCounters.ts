import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `n_aborted`: of a group subtree's cancelled jobs (`n_cancelled`), those that show as `aborted` (a worker reported
 * `aborted`, or an abort cancellation counted them). With it, a run's `job_counts` by status come from its root
 * group's counters row alone: `terminated` = n_cancelled - n_aborted. Kept exactly as n_cancelled is: in the same
 * statements, under the same chain locks.
 *
 * The backfill counts each aborted job where its outcome was counted: a counted job in its own group, a job a
 * cancellation counted in the cancelled group (the earliest cancellation above it, as the views pick it); then sums
 * up every ancestor.
 */
export class AddAbortedToJobGroupCounters1765238400000 implements MigrationInterface {
  name = 'AddAbortedToJobGroupCounters1765238400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters ADD COLUMN n_aborted integer NOT NULL DEFAULT 0`);
    await q.query(
      `WITH eff AS (
         SELECT DISTINCT ON (sa.run_id, sa.job_group_id) sa.run_id, sa.job_group_id, x.job_group_id AS target, x.reason
           FROM job_groups_cancelled x
           JOIN job_group_self_and_ancestors sa ON sa.run_id = x.run_id AND sa.ancestor_id = x.job_group_id
          ORDER BY sa.run_id, sa.job_group_id, x.cancelled_at, sa.level DESC
       ), counted_at AS (
         SELECT j.run_id, CASE WHEN j.completion_counted THEN j.job_group_id ELSE e.target END AS g, count(*)::int AS n
           FROM jobs j LEFT JOIN eff e ON e.run_id = j.run_id AND e.job_group_id = j.job_group_id
          WHERE (j.completion_counted AND j.status = 'aborted')
            OR (NOT j.completion_counted AND e.reason = 'aborted_by_user')
          GROUP BY 1, 2
       ), per_group AS (
         SELECT c.run_id, sa.ancestor_id, sum(c.n)::int AS n
           FROM counted_at c JOIN job_group_self_and_ancestors sa ON sa.run_id = c.run_id AND sa.job_group_id = c.g
          GROUP BY 1, 2
       )
       UPDATE job_group_counters c SET n_aborted = p.n FROM per_group p
         WHERE c.run_id = p.run_id AND c.job_group_id = p.ancestor_id`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_aborted
         CHECK (n_aborted >= 0 AND n_aborted <= n_cancelled)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_aborted`);
    await q.query(`ALTER TABLE job_group_counters DROP COLUMN n_aborted`);
  }
}
