import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * always_run jobs are not stopped by a cancellation (only an abort stops them): a group's counters keep how many
 * always_run jobs of its subtree are not counted yet, so a cancellation counts every other unfinished job at once and
 * leaves those to be counted when they finish, and views show them as what they are.
 */
export class AddAlwaysRunOpenToJobGroupCounters1766275200000 implements MigrationInterface {
  name = 'AddAlwaysRunOpenToJobGroupCounters1766275200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters ADD COLUMN n_always_run_open integer NOT NULL DEFAULT 0`);
    await q.query(
      `UPDATE job_group_counters c SET n_always_run_open = x.n
         FROM (SELECT sa.run_id, sa.ancestor_id, count(*)::int AS n
                 FROM jobs j JOIN job_group_self_and_ancestors sa
                   ON sa.run_id = j.run_id AND sa.job_group_id = j.job_group_id
                WHERE j.always_run AND NOT j.completion_counted
                GROUP BY 1, 2) x
        WHERE c.run_id = x.run_id AND c.job_group_id = x.ancestor_id`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_always_run_open
         CHECK (n_always_run_open >= 0 AND n_always_run_open <= n_jobs - n_completed)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_always_run_open`);
    await q.query(`ALTER TABLE job_group_counters DROP COLUMN n_always_run_open`);
  }
}
