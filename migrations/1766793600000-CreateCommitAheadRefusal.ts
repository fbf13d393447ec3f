import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A statement that ends its transaction with COMMIT queued right behind it (src/infra/database/commit-ahead.ts) must
 * fail rather than answer that something more is due (a job its counting left to the caller, say): this raises
 * SQLSTATE RP001 (runplane's own class), which aborts the transaction so that the COMMIT behind ends it as a
 * rollback, and which TransactionRunner tells from every other error. Returns boolean so a CASE can call it.
 */
export class CreateCommitAheadRefusal1766793600000 implements MigrationInterface {
  name = 'CreateCommitAheadRefusal1766793600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE FUNCTION runplane_refuse_commit_ahead(reason text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
      BEGIN
        RAISE EXCEPTION USING ERRCODE = 'RP001', MESSAGE = 'commit ahead refused: ' || reason;
      END
      $$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION runplane_refuse_commit_ahead(text)`);
  }
}
