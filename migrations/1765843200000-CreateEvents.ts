import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The event feed (issue #12, item 4): an append-only table written in the transaction of each change it records.
 * Readers order it by (tx_id, seq) and read only below the snapshot's xmin (see EventsRepository.read), hence the
 * two keyset indexes: a project's feed and one run's. tx_id has no default: the one INSERT (EventsRepository.insert)
 * computes it: the writing transaction's id, raised to its snapshot's xmax − 1.
 */
export class CreateEvents1765843200000 implements MigrationInterface {
  name = 'CreateEvents1765843200000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE events (
        seq bigint GENERATED ALWAYS AS IDENTITY,
        tx_id xid8 NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        type varchar(32) NOT NULL,
        project_id uuid NOT NULL,
        run_id uuid,
        job_group_id integer,
        job_id uuid,
        submission_num integer,
        status varchar(16),
        reason varchar(256),
        actor varchar(64),
        CONSTRAINT pk_events PRIMARY KEY (seq)
      )`);
    await q.query(`CREATE INDEX idx_events_project_id_tx_id_seq ON events (project_id, tx_id, seq)`);
    await q.query(`CREATE INDEX idx_events_run_id_tx_id_seq ON events (run_id, tx_id, seq)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE events`);
  }
}
