import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An idempotency key keeps a reference to what its request created (kind and id) instead of the whole response:
 * a 10,000-job run's response is about 1 MB, kept for 24 h per key. A repeat re-reads the object. Existing rows
 * are converted from the ids in their stored responses, so a retry across the upgrade still finds its object.
 */
export class StoreIdempotencyResourceReferences1765497600000 implements MigrationInterface {
  name = 'StoreIdempotencyResourceReferences1765497600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE idempotency_keys
         ADD COLUMN resource_kind varchar(16),
         ADD COLUMN resource_id varchar(64),
         ADD CONSTRAINT ck_idempotency_keys_resource_kind
           CHECK (resource_kind IN ('project', 'run', 'job_group', 'jobs'))`,
    );
    await q.query(
      `UPDATE idempotency_keys SET
         resource_kind = CASE
           WHEN scope = 'POST /projects' THEN 'project'
           WHEN scope LIKE 'POST /projects/%/runs' THEN 'run'
           WHEN scope LIKE 'POST /runs/%/job-groups' THEN 'job_group'
           WHEN scope LIKE 'POST /runs/%/job-groups/%/jobs' THEN 'jobs'
         END,
         resource_id = CASE
           WHEN scope = 'POST /projects' OR scope LIKE 'POST /projects/%/runs' THEN response_body->>'id'
           WHEN scope LIKE 'POST /runs/%/job-groups' THEN response_body->>'job_group_id'
           WHEN scope LIKE 'POST /runs/%/job-groups/%/jobs' THEN response_body->'jobs'->0->>'job_num'
         END`,
    );
    // Anything that could not be converted would answer a repeat with nothing: forget it (keys live 24 h anyway).
    await q.query(`DELETE FROM idempotency_keys WHERE resource_kind IS NULL OR resource_id IS NULL`);
    await q.query(`ALTER TABLE idempotency_keys DROP COLUMN response_body`);
  }

  async down(q: QueryRunner): Promise<void> {
    // References cannot be turned back into responses: the keys are forgotten.
    await q.query(`DELETE FROM idempotency_keys`);
    await q.query(
      `ALTER TABLE idempotency_keys
         ADD COLUMN response_body jsonb,
         DROP CONSTRAINT ck_idempotency_keys_resource_kind,
         DROP COLUMN resource_kind,
         DROP COLUMN resource_id`,
    );
  }
}
