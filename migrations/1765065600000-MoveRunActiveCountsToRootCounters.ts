import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A run's active counts (jobs provisioning, running, queued as a retry) move from the run row to its root group's
 * counter row (group 0 is the run). Every lifecycle transition locks that row anyway; with the counts on it, a
 * transition derives the run's status from the row it holds and writes the run row only when that status changes,
 * instead of every transition of every job of a run queueing for the run row.
 */
export class MoveRunActiveCountsToRootCounters1765065600000 implements MigrationInterface {
  name = 'MoveRunActiveCountsToRootCounters1765065600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE job_group_counters
         ADD COLUMN n_provisioning integer NOT NULL DEFAULT 0,
         ADD COLUMN n_running integer NOT NULL DEFAULT 0,
         ADD COLUMN n_retrying integer NOT NULL DEFAULT 0`,
    );
    await q.query(
      `UPDATE job_group_counters c
          SET n_provisioning = r.n_provisioning, n_running = r.n_running, n_retrying = r.n_retrying
         FROM runs r WHERE r.id = c.run_id AND c.job_group_id = 0`,
    );
    await q.query(
      `ALTER TABLE job_group_counters ADD CONSTRAINT ck_job_group_counters_active
         CHECK (n_provisioning >= 0 AND n_running >= 0 AND n_retrying >= 0
                AND (job_group_id = 0 OR n_provisioning + n_running + n_retrying = 0))`,
    );
    await q.query(`ALTER TABLE runs DROP COLUMN n_provisioning, DROP COLUMN n_running, DROP COLUMN n_retrying`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE runs
         ADD COLUMN n_provisioning integer NOT NULL DEFAULT 0,
         ADD COLUMN n_running integer NOT NULL DEFAULT 0,
         ADD COLUMN n_retrying integer NOT NULL DEFAULT 0`,
    );
    await q.query(
      `UPDATE runs r SET n_provisioning = c.n_provisioning, n_running = c.n_running, n_retrying = c.n_retrying
         FROM job_group_counters c WHERE c.run_id = r.id AND c.job_group_id = 0`,
    );
    await q.query(`ALTER TABLE job_group_counters DROP CONSTRAINT ck_job_group_counters_active`);
    await q.query(
      `ALTER TABLE job_group_counters DROP COLUMN n_provisioning, DROP COLUMN n_running, DROP COLUMN n_retrying`,
    );
  }
}
