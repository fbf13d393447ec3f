import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A job's row is updated in place twice or more in its life (started, finished; retried), and none of those updates
 * changes a column its indexes hold, so each can be a HOT update (no index entry written) when its page has room for
 * the new version. Jobs are inserted densely, thousands at a time, and a fleet's batched `running` reports update
 * whole pages of them at once: at the default fill factor (100) most of those pages had no room, and the
 * completions that followed ran ~10 % slower (13,884 HOT of 30,600 updates, against 21,497 after single reports).
 * Leaving a fifth of each page free keeps them HOT; it applies to pages written from now on (existing pages keep their
 * layout until a rewrite such as VACUUM FULL).
 */
export class LeaveRoomInJobPages1766707200000 implements MigrationInterface {
  name = 'LeaveRoomInJobPages1766707200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE jobs SET (fillfactor = 80)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE jobs RESET (fillfactor)`);
  }
}
