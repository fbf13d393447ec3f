import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Jobs whose spec asks for an `image` are claimed only by workers that declare a container runtime. Whether a
 * submission needs one is a scheduling fact like its cpu, memory and gpu, so it is kept on the submission: the claim
 * filters on it without reading job specs. Workers without a runtime walk a queue index of their own (the queue
 * without container jobs), so a deep queue of image jobs costs them nothing.
 */
export class AddNeedsContainerToJobSubmissions1766102400000 implements MigrationInterface {
  name = 'AddNeedsContainerToJobSubmissions1766102400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_submissions ADD COLUMN needs_container boolean NOT NULL DEFAULT false`);
    await q.query(
      `UPDATE job_submissions s SET needs_container = true
         FROM jobs j WHERE j.id = s.job_id AND j.spec->>'image' IS NOT NULL`,
    );
    await q.query(
      `CREATE INDEX idx_job_submissions_queue_no_container ON job_submissions (priority DESC, submitted_at, id)
        WHERE status = 'submitted' AND NOT needs_container`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_job_submissions_queue_no_container`);
    await q.query(`ALTER TABLE job_submissions DROP COLUMN needs_container`);
  }
}
