import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A lease is held by a worker id under a service account: reports for a submission are accepted only from the
 * account that claimed it (and the worker id it claimed with). Submissions claimed before this migration have no
 * recorded account; no account can report them, so their leases lapse and they end as `instance_unreachable` (and are
 * retried under their run's policy): an in-flight attempt may be lost once on upgrade, but no lease stays open to any
 * account that presents a worker id.
 */
export class AddClaimedByUserIdToJobSubmissions1765324800000 implements MigrationInterface {
  name = 'AddClaimedByUserIdToJobSubmissions1765324800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_submissions ADD COLUMN claimed_by_user_id uuid`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_submissions DROP COLUMN claimed_by_user_id`);
  }
}
