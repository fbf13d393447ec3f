import { MigrationInterface, QueryRunner } from 'typeorm';

/** When the background sweep has terminated every queued submission under a cancellation (null = still to do). */
export class AddSweptAtToJobGroupsCancelled1764806400000 implements MigrationInterface {
  name = 'AddSweptAtToJobGroupsCancelled1764806400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_groups_cancelled ADD COLUMN swept_at timestamptz`);
    await q.query(
      `CREATE INDEX idx_job_groups_cancelled_unswept ON job_groups_cancelled (cancelled_at) WHERE swept_at IS NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_job_groups_cancelled_unswept`);
    await q.query(`ALTER TABLE job_groups_cancelled DROP COLUMN swept_at`);
  }
}
