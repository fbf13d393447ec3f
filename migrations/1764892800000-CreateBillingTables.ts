import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Billing: versioned resource rates, billed attempts (one per submission that started running, with its monotone
 * rollup time and the group chain it bills), the quantities pinned at start, and usage aggregates per job, per job
 * group (every ancestor), per run and per project × user × UTC day. Usage is stored in unit-seconds (exact numeric);
 * hot rows are spread over `token` shards that readers sum.
 */
export class CreateBillingTables1764892800000 implements MigrationInterface {
  name = 'CreateBillingTables1764892800000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE resources (
        id serial NOT NULL,
        name varchar(32) NOT NULL,
        unit varchar(32) NOT NULL,
        rate_usd_per_unit_hour numeric(20,10) NOT NULL,
        version integer NOT NULL,
        valid_from timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_resources PRIMARY KEY (id),
        CONSTRAINT uq_resources_name_version UNIQUE (name, version),
        CONSTRAINT ck_resources_rate CHECK (rate_usd_per_unit_hour >= 0),
        CONSTRAINT ck_resources_version CHECK (version > 0)
      )`);
    await q.query(`
      INSERT INTO resources (name, unit, rate_usd_per_unit_hour, version) VALUES
        ('cpu', 'core-hour', 0.04, 1),
        ('memory', 'GiB-hour', 0.005, 1),
        ('gpu', 'gpu-hour', 1.0, 1)`);

    await q.query(`
      CREATE TABLE billing_attempts (
        submission_id uuid NOT NULL,
        run_id uuid NOT NULL,
        job_id uuid NOT NULL,
        project_id uuid NOT NULL,
        user_id uuid NOT NULL,
        job_group_ids integer array NOT NULL,
        started_at timestamptz NOT NULL,
        rolled_up_to timestamptz NOT NULL,
        closed_at timestamptz,
        CONSTRAINT pk_billing_attempts PRIMARY KEY (submission_id),
        CONSTRAINT ck_billing_attempts_rolled_up_to CHECK (rolled_up_to >= started_at)
      )`);
    await q.query(`CREATE INDEX idx_billing_attempts_run_id_open ON billing_attempts (run_id) WHERE closed_at IS NULL`);
    await q.query(
      `CREATE INDEX idx_billing_attempts_project_id_open ON billing_attempts (project_id) WHERE closed_at IS NULL`,
    );

    await q.query(`
      CREATE TABLE submission_resources (
        submission_id uuid NOT NULL,
        resource_id integer NOT NULL,
        quantity numeric(20,10) NOT NULL,
        CONSTRAINT pk_submission_resources PRIMARY KEY (submission_id, resource_id),
        CONSTRAINT fk_submission_resources_submission_id FOREIGN KEY (submission_id)
          REFERENCES billing_attempts (submission_id) ON DELETE CASCADE,
        CONSTRAINT fk_submission_resources_resource_id FOREIGN KEY (resource_id) REFERENCES resources (id),
        CONSTRAINT ck_submission_resources_quantity CHECK (quantity > 0)
      )`);

    await q.query(`
      CREATE TABLE billing_job_usage (
        job_id uuid NOT NULL,
        resource_id integer NOT NULL,
        run_id uuid NOT NULL,
        usage numeric NOT NULL,
        CONSTRAINT pk_billing_job_usage PRIMARY KEY (job_id, resource_id)
      )`);
    await q.query(`
      CREATE TABLE billing_group_usage (
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        resource_id integer NOT NULL,
        token smallint NOT NULL,
        usage numeric NOT NULL,
        CONSTRAINT pk_billing_group_usage PRIMARY KEY (run_id, job_group_id, resource_id, token)
      )`);
    await q.query(`
      CREATE TABLE billing_run_usage (
        run_id uuid NOT NULL,
        resource_id integer NOT NULL,
        token smallint NOT NULL,
        usage numeric NOT NULL,
        CONSTRAINT pk_billing_run_usage PRIMARY KEY (run_id, resource_id, token)
      )`);
    await q.query(`
      CREATE TABLE billing_daily_usage (
        project_id uuid NOT NULL,
        user_id uuid NOT NULL,
        day date NOT NULL,
        resource_id integer NOT NULL,
        token smallint NOT NULL,
        usage numeric NOT NULL,
        CONSTRAINT pk_billing_daily_usage PRIMARY KEY (project_id, user_id, day, resource_id, token)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE billing_daily_usage`);
    await q.query(`DROP TABLE billing_run_usage`);
    await q.query(`DROP TABLE billing_group_usage`);
    await q.query(`DROP TABLE billing_job_usage`);
    await q.query(`DROP TABLE submission_resources`);
    await q.query(`DROP TABLE billing_attempts`);
    await q.query(`DROP TABLE resources`);
  }
}
