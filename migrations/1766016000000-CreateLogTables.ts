import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Jobs' output (issue #14): chunks of each submission's stdout and stderr at byte offsets, and per submission the
 * bytes stored of each stream and the chunks written (its row serialises the writers). Both carry the run, so a
 * deleted run's logs go with it.
 */
export class CreateLogTables1766016000000 implements MigrationInterface {
  name = 'CreateLogTables1766016000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE submission_logs (
        submission_id uuid NOT NULL,
        run_id uuid NOT NULL,
        stdout_bytes bigint NOT NULL DEFAULT 0,
        stderr_bytes bigint NOT NULL DEFAULT 0,
        n_chunks integer NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_submission_logs PRIMARY KEY (submission_id)
      )`);
    await q.query(`CREATE INDEX idx_submission_logs_run_id ON submission_logs (run_id)`);
    await q.query(`
      CREATE TABLE log_chunks (
        submission_id uuid NOT NULL,
        stream varchar(6) NOT NULL,
        byte_offset bigint NOT NULL,
        seq integer NOT NULL,
        run_id uuid NOT NULL,
        length integer NOT NULL,
        data bytea NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_log_chunks PRIMARY KEY (submission_id, stream, byte_offset),
        CONSTRAINT ck_log_chunks_stream CHECK (stream IN ('stdout', 'stderr')),
        CONSTRAINT ck_log_chunks_length CHECK (length > 0)
      )`);
    await q.query(`CREATE UNIQUE INDEX uq_log_chunks_submission_id_seq ON log_chunks (submission_id, seq)`);
    await q.query(`CREATE INDEX idx_log_chunks_run_id ON log_chunks (run_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE log_chunks`);
    await q.query(`DROP TABLE submission_logs`);
  }
}
