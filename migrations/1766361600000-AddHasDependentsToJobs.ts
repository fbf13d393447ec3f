import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Whether a job has children (job_parents rows naming it as parent), kept on the job row: the finish path reads it
 * with the job (no extra round trip) and looks for children to release or end only when there are some, so a job
 * without dependents (nearly all) finishes in as many statements as before dependencies existed.
 */
export class AddHasDependentsToJobs1766361600000 implements MigrationInterface {
  name = 'AddHasDependentsToJobs1766361600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false`);
    await q.query(
      `UPDATE jobs j SET has_dependents = true WHERE EXISTS (SELECT 1 FROM job_parents e WHERE e.parent_id = j.id)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE jobs DROP COLUMN has_dependents`);
  }
}
