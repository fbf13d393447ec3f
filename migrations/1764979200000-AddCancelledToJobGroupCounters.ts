import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A direct-cancellation flag on the counters row. Every lifecycle write locks its chain's counter rows anyway; with
 * the flag on those rows, the locking statement itself returns whether the chain is cancelled (locked rows come back
 * in their latest committed version), so the hottest transaction needs no second look-up.
 */
export class AddCancelledToJobGroupCounters1764979200000 implements MigrationInterface {
  name = 'AddCancelledToJobGroupCounters1764979200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters ADD COLUMN cancelled boolean NOT NULL DEFAULT false`);
    await q.query(
      `UPDATE job_group_counters c SET cancelled = true FROM job_groups_cancelled x
         WHERE x.run_id = c.run_id AND x.job_group_id = c.job_group_id`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE job_group_counters DROP COLUMN cancelled`);
  }
}
