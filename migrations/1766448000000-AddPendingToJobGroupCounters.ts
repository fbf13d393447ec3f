import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run's job_counts show jobs waiting for their parents as `pending`, apart from the queued ones: the run's root
 * counters keep how many of its jobs have that status (like its active counts, on group 0 only), moved by the
 * statements that already write the root when jobs are added, released or ended by a parent's failure. Pending jobs
 * under a cancellation show as cancelled; a partial index finds them (few, and only while a cancellation is fresh).
 */
export class AddPendingToJobGroupCounters1766448000000 implements MigrationInterface {
  name = 'AddPendingToJobGroupCounters1766448000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters ADD COLUMN n_pending integer NOT NULL DEFAULT 0`);
    await q.query(
      `UPDATE job_group_counters c SET n_pending = x.n
         FROM (SELECT run_id, count(*)::int AS n FROM jobs WHERE status = 'pending' GROUP BY run_id) x
        WHERE c.run_id = x.run_id AND c.job_group_id = 0`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_pending
         CHECK (n_pending >= 0 AND (job_group_id = 0 OR n_pending = 0))`,
    );
    await q.query(
      `CREATE INDEX idx_job_submissions_pending ON job_submissions (run_id, job_group_id) WHERE status = 'pending'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_job_submissions_pending`);
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_pending`);
    await q.query(`ALTER TABLE job_group_counters DROP COLUMN n_pending`);
  }
}
