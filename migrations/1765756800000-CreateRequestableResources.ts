import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Billing quantities as data (issue #12, item 3). `requestable_resources` lists the keys a job spec's `resources`
 * object may carry and how each is billed: the resource (`resources.name`) it maps to, that resource's unit, and the
 * factor from the requested quantity to the billed unit (memory_mib → memory in GiB: × 1/1024, exact in 10 decimals).
 * It also holds what a request may say for the key: required or not, bounds, and decimals (`scale`). Migrations are
 * its only writer: adding a billed resource is one row here (optional key) plus a rate (`POST /admin/v1/resources`).
 *
 * The checks keep every billed quantity exact in `submission_resources.quantity` (numeric(20,10)): a requested
 * quantity with `scale` decimals times the factor (`min_scale`: the decimals it really has) has at most 10 decimals,
 * and the largest request times the factor stays below 10^10. Keys are what field names echo: lowercase words only.
 *
 * cpu, memory_mib and gpu keep the bounds their DTO had (they also fill job_submissions' scheduling columns:
 * cpu numeric(10,3), memory_mib and gpu integers). disk_gib is new: GiB of disk, billed as `disk` at 0.0001 USD per
 * GiB-hour, up to 1 PiB, 3 decimals. A `disk` rate an admin may have set before (it could never be billed) is kept
 * when its unit is already GiB-hour; otherwise a new version at 0.0001 per GiB-hour replaces it.
 */
export class CreateRequestableResources1765756800000 implements MigrationInterface {
  name = 'CreateRequestableResources1765756800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE requestable_resources (
        spec_key varchar(32) NOT NULL,
        resource_name varchar(32) NOT NULL,
        unit varchar(32) NOT NULL,
        factor numeric(20,10) NOT NULL,
        scale smallint NOT NULL,
        min_quantity numeric(20,10) NOT NULL DEFAULT 0,
        max_quantity numeric(20,10) NOT NULL,
        required boolean NOT NULL DEFAULT false,
        CONSTRAINT pk_requestable_resources PRIMARY KEY (spec_key),
        CONSTRAINT uq_requestable_resources_resource_name UNIQUE (resource_name),
        CONSTRAINT ck_requestable_resources_spec_key CHECK (spec_key ~ '^[a-z][a-z0-9_]{0,31}$'),
        CONSTRAINT ck_requestable_resources_resource_name CHECK (resource_name ~ '^[a-z][a-z0-9_-]{0,31}$'),
        CONSTRAINT ck_requestable_resources_factor CHECK (factor > 0),
        CONSTRAINT ck_requestable_resources_scale CHECK (scale >= 0 AND scale + min_scale(factor) <= 10),
        CONSTRAINT ck_requestable_resources_bounds CHECK (min_quantity >= 0 AND max_quantity >= min_quantity),
        CONSTRAINT ck_requestable_resources_max CHECK (max_quantity * factor < 10000000000)
      )`);
    await q.query(`
      INSERT INTO requestable_resources
        (spec_key, resource_name, unit, factor, scale, min_quantity, max_quantity, required)
      VALUES ('cpu', 'cpu', 'core-hour', 1, 3, 0.001, 1024, true),
             ('memory_mib', 'memory', 'GiB-hour', 0.0009765625, 0, 1, 16777216, true),
             ('gpu', 'gpu', 'gpu-hour', 1, 0, 0, 64, false),
             ('disk_gib', 'disk', 'GiB-hour', 1, 3, 0, 1048576, false)`);
    await q.query(`
      INSERT INTO resources (name, unit, rate_usd_per_unit_hour, version)
      SELECT 'disk', 'GiB-hour', 0.0001, coalesce(max(version), 0) + 1 FROM resources WHERE name = 'disk'
      HAVING coalesce((SELECT r.unit FROM resources r WHERE r.name = 'disk' ORDER BY r.version DESC LIMIT 1), '')
             <> 'GiB-hour'`);
  }

  async down(q: QueryRunner): Promise<void> {
    // The disk rate versions no usage was pinned to go; billed ones stay (their usage keeps its rate).
    await q.query(
      `DELETE FROM resources r WHERE r.name = 'disk'
          AND NOT EXISTS (SELECT 1 FROM submission_resources sr WHERE sr.resource_id = r.id)`,
    );
    await q.query(`DROP TABLE requestable_resources`);
  }
}
