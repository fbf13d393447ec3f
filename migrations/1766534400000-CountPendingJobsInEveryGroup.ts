import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every group's counters keep how many jobs of its subtree wait for their parents (status `pending`), not only the
 * root's: a group view shows its pending jobs from one row, like its other counts. The statements that add jobs to
 * a chain count them into every level; a release or a dependency failure moves every level of the jobs' chains.
 */
export class CountPendingJobsInEveryGroup1766534400000 implements MigrationInterface {
  name = 'CountPendingJobsInEveryGroup1766534400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_pending`);
    await q.query(
      `UPDATE job_group_counters c SET n_pending = x.n
         FROM (SELECT sa.run_id, sa.ancestor_id, count(*)::int AS n
                 FROM jobs j
                 JOIN job_group_self_and_ancestors sa ON sa.run_id = j.run_id AND sa.job_group_id = j.job_group_id
                WHERE j.status = 'pending' AND sa.ancestor_id <> 0
                GROUP BY sa.run_id, sa.ancestor_id) x
        WHERE c.run_id = x.run_id AND c.job_group_id = x.ancestor_id`,
    );
    await q.query(`ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_pending CHECK (n_pending >= 0)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_pending`);
    await q.query(`UPDATE job_group_counters SET n_pending = 0 WHERE job_group_id <> 0 AND n_pending <> 0`);
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_pending
         CHECK (n_pending >= 0 AND (job_group_id = 0 OR n_pending = 0))`,
    );
  }
}
