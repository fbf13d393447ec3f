import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateUsersAndProjects1764633600000 implements MigrationInterface {
  name = 'CreateUsersAndProjects1764633600000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE users (
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        name varchar(64) NOT NULL,
        global_role varchar(16) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_users PRIMARY KEY (id),
        CONSTRAINT uq_users_name UNIQUE (name),
        CONSTRAINT ck_users_global_role CHECK (global_role IN ('admin', 'user', 'service'))
      )`);
    await q.query(`
      CREATE TABLE api_tokens (
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        user_id uuid NOT NULL,
        token_hash char(64) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_api_tokens PRIMARY KEY (id),
        CONSTRAINT uq_api_tokens_token_hash UNIQUE (token_hash),
        CONSTRAINT fk_api_tokens_user_id FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
      )`);
    await q.query(`CREATE INDEX idx_api_tokens_user_id ON api_tokens (user_id)`);
    await q.query(`
      CREATE TABLE projects (
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        name varchar(64) NOT NULL,
        billing_limit_usd numeric(18, 6),
        created_by uuid NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_projects PRIMARY KEY (id),
        CONSTRAINT uq_projects_name UNIQUE (name),
        CONSTRAINT fk_projects_created_by FOREIGN KEY (created_by) REFERENCES users (id),
        CONSTRAINT ck_projects_billing_limit_usd CHECK (billing_limit_usd IS NULL OR billing_limit_usd >= 0)
      )`);
    await q.query(`
      CREATE TABLE project_members (
        project_id uuid NOT NULL,
        user_id uuid NOT NULL,
        role varchar(16) NOT NULL,
        CONSTRAINT pk_project_members PRIMARY KEY (project_id, user_id),
        CONSTRAINT fk_project_members_project_id FOREIGN KEY (project_id) REFERENCES projects (id) ON DELETE CASCADE,
        CONSTRAINT fk_project_members_user_id FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE,
        CONSTRAINT ck_project_members_role CHECK (role IN ('admin', 'manager', 'user'))
      )`);
    await q.query(`CREATE INDEX idx_project_members_user_id ON project_members (user_id)`);
    await q.query(`
      CREATE TABLE idempotency_keys (
        user_id uuid NOT NULL,
        key varchar(255) NOT NULL,
        scope varchar(255) NOT NULL,
        request_hash char(64) NOT NULL,
        response_status integer,
        response_body jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_idempotency_keys PRIMARY KEY (user_id, key),
        CONSTRAINT fk_idempotency_keys_user_id FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE
      )`);
    await q.query(`CREATE INDEX idx_idempotency_keys_created_at ON idempotency_keys (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE idempotency_keys`);
    await q.query(`DROP TABLE project_members`);
    await q.query(`DROP TABLE projects`);
    await q.query(`DROP TABLE api_tokens`);
    await q.query(`DROP TABLE users`);
  }
}
