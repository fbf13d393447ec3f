import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A project's unfinished runs, for the queued-job limit (RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT): its check sums
 * the root counters of these runs only, so its cost follows the project's unfinished work, not its history.
 */
export class AddUnfinishedRunsIndex1765497600001 implements MigrationInterface {
  name = 'AddUnfinishedRunsIndex1765497600001';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX idx_runs_project_id_unfinished ON runs (project_id) WHERE finished_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_runs_project_id_unfinished`);
  }
}
