import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `max_duration_s` enforced by the server: a running submission's deadline (started_at + the job's max_duration_s),
 * set when it starts running, so the overdue loop reads an index of running submissions with a deadline instead of
 * every running submission's job spec.
 */
export class AddDeadlineAtToJobSubmissions1765670400000 implements MigrationInterface {
  name = 'AddDeadlineAtToJobSubmissions1765670400000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_submissions ADD COLUMN deadline_at timestamptz`);
    await q.query(
      `CREATE INDEX idx_job_submissions_deadline ON job_submissions (deadline_at)
        WHERE status IN ('running', 'terminating') AND deadline_at IS NOT NULL`,
    );
    // Submissions already running when this lands get their deadline from their job's spec.
    await q.query(
      `UPDATE job_submissions s
          SET deadline_at = s.started_at + make_interval(secs => (j.spec->>'max_duration_s')::float8)
         FROM jobs j
        WHERE j.id = s.job_id AND s.status IN ('running', 'terminating') AND s.started_at IS NOT NULL
          AND j.spec->>'max_duration_s' IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX idx_job_submissions_deadline`);
    await q.query(`ALTER TABLE job_submissions DROP COLUMN deadline_at`);
  }
}
