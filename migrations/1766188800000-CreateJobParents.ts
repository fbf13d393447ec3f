import { MigrationInterface, QueryRunner } from 'typeorm';

const STATUSES_BEFORE = [
  'submitted',
  'provisioning',
  'running',
  'terminating',
  'done',
  'failed',
  'terminated',
  'aborted',
]
  .map((s) => `'${s}'`)
  .join(', ');
const STATUSES_AFTER = `'pending', ${STATUSES_BEFORE}`;

/**
 * Dependencies between jobs (issue #13): one row per edge (child → parent) in job_parents, indexed both ways (a
 * child's parents by the primary key, a parent's children by idx_job_parents_parent_id), and on each job the number
 * of its parents (views read edges only for jobs that have some) and of those not finished yet. A job with
 * unfinished parents, and its submission 0, are `pending`: outside every queue index (those are partial on
 * `status = 'submitted'`), so a claim never reads pending work.
 */
export class CreateJobParents1766188800000 implements MigrationInterface {
  name = 'CreateJobParents1766188800000';

  async up(q: QueryRunner): Promise<void> {
    for (const [table, check] of [
      ['jobs', 'ck_jobs_status'],
      ['job_submissions', 'ck_job_submissions_status'],
    ]) {
      await q.query(`ALTER TABLE ${table} DROP CONSTRAINT ${check}`);
      await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${check} CHECK (status IN (${STATUSES_AFTER}))`);
    }
    await q.query(
      `ALTER TABLE jobs ADD COLUMN n_parents integer NOT NULL DEFAULT 0,
                        ADD COLUMN n_pending_parents integer NOT NULL DEFAULT 0`,
    );
    await q.query(`ALTER TABLE jobs ADD CONSTRAINT ck_jobs_n_pending_parents CHECK (n_pending_parents >= 0)`);
    await q.query(`
      CREATE TABLE job_parents (
        job_id uuid NOT NULL,
        parent_id uuid NOT NULL,
        run_id uuid NOT NULL,
        CONSTRAINT pk_job_parents PRIMARY KEY (job_id, parent_id),
        CONSTRAINT fk_job_parents_job_id FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
        CONSTRAINT fk_job_parents_parent_id FOREIGN KEY (parent_id) REFERENCES jobs (id) ON DELETE CASCADE,
        CONSTRAINT ck_job_parents_not_self CHECK (job_id <> parent_id)
      )`);
    await q.query(`CREATE INDEX idx_job_parents_parent_id ON job_parents (parent_id, job_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE job_parents`);
    await q.query(`ALTER TABLE jobs DROP CONSTRAINT ck_jobs_n_pending_parents`);
    await q.query(`ALTER TABLE jobs DROP COLUMN n_pending_parents, DROP COLUMN n_parents`);
    for (const [table, check] of [
      ['jobs', 'ck_jobs_status'],
      ['job_submissions', 'ck_job_submissions_status'],
    ]) {
      await q.query(`ALTER TABLE ${table} DROP CONSTRAINT ${check}`);
      await q.query(`ALTER TABLE ${table} ADD CONSTRAINT ${check} CHECK (status IN (${STATUSES_BEFORE}))`);
    }
  }
}
