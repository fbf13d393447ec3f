import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Runs, their job-group tree (closure table, direct cancellations, recursive counters in their own rows),
 * jobs (one row per logical job, carrying its newest submission's facts) and job submissions (one row per attempt).
 */
export class CreateRunsJobsAndJobGroups1764720000000 implements MigrationInterface {
  name = 'CreateRunsJobsAndJobGroups1764720000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE runs (
        id uuid NOT NULL DEFAULT gen_random_uuid(),
        project_id uuid NOT NULL,
        user_id uuid NOT NULL,
        run_name varchar(128) NOT NULL,
        status varchar(16) NOT NULL DEFAULT 'submitted',
        status_message varchar(64),
        termination_reason varchar(64),
        priority integer NOT NULL DEFAULT 0,
        spec jsonb NOT NULL,
        attributes jsonb NOT NULL DEFAULT '{}',
        n_provisioning integer NOT NULL DEFAULT 0,
        n_running integer NOT NULL DEFAULT 0,
        n_retrying integer NOT NULL DEFAULT 0,
        submitted_at timestamptz(3) NOT NULL DEFAULT now(),
        finished_at timestamptz,
        deleted boolean NOT NULL DEFAULT false,
        CONSTRAINT pk_runs PRIMARY KEY (id),
        CONSTRAINT fk_runs_project_id FOREIGN KEY (project_id) REFERENCES projects (id),
        CONSTRAINT fk_runs_user_id FOREIGN KEY (user_id) REFERENCES users (id),
        CONSTRAINT ck_runs_status
          CHECK (status IN ('pending', 'submitted', 'provisioning', 'running', 'terminating', 'terminated', 'failed',
                            'done'))
      )`);
    await q.query(`CREATE UNIQUE INDEX uq_runs_project_id_run_name ON runs (project_id, run_name) WHERE NOT deleted`);
    await q.query(
      `CREATE INDEX idx_runs_project_id_submitted_at ON runs (project_id, submitted_at, id) WHERE NOT deleted`,
    );
    await q.query(`CREATE INDEX idx_runs_submitted_at ON runs (submitted_at, id) WHERE NOT deleted`);

    await q.query(`
      CREATE TABLE job_groups (
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        parent_id integer,
        depth integer NOT NULL,
        attributes jsonb NOT NULL DEFAULT '{}',
        cancel_after_n_failures integer,
        state varchar(16) NOT NULL DEFAULT 'complete',
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_job_groups PRIMARY KEY (run_id, job_group_id),
        CONSTRAINT fk_job_groups_run_id FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE,
        CONSTRAINT fk_job_groups_parent FOREIGN KEY (run_id, parent_id) REFERENCES job_groups (run_id, job_group_id),
        CONSTRAINT ck_job_groups_depth CHECK (depth BETWEEN 0 AND 5),
        CONSTRAINT ck_job_groups_root CHECK ((job_group_id = 0) = (parent_id IS NULL)),
        CONSTRAINT ck_job_groups_state CHECK (state IN ('running', 'complete')),
        CONSTRAINT ck_job_groups_cancel_after_n_failures
          CHECK (cancel_after_n_failures IS NULL OR cancel_after_n_failures > 0)
      )`);
    await q.query(`CREATE INDEX idx_job_groups_run_id_parent_id ON job_groups (run_id, parent_id, job_group_id)`);

    await q.query(`
      CREATE TABLE job_group_self_and_ancestors (
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        ancestor_id integer NOT NULL,
        level integer NOT NULL,
        CONSTRAINT pk_job_group_self_and_ancestors PRIMARY KEY (run_id, job_group_id, ancestor_id),
        CONSTRAINT fk_job_group_self_and_ancestors_group FOREIGN KEY (run_id, job_group_id)
          REFERENCES job_groups (run_id, job_group_id) ON DELETE CASCADE,
        CONSTRAINT ck_job_group_self_and_ancestors_level CHECK (level BETWEEN 0 AND 5)
      )`);
    await q.query(
      `CREATE INDEX idx_job_group_self_and_ancestors_ancestor
         ON job_group_self_and_ancestors (run_id, ancestor_id, job_group_id)`,
    );

    await q.query(`
      CREATE TABLE job_groups_cancelled (
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        cancelled_at timestamptz NOT NULL DEFAULT now(),
        cancelled_by varchar(64) NOT NULL,
        reason varchar(256) NOT NULL,
        CONSTRAINT pk_job_groups_cancelled PRIMARY KEY (run_id, job_group_id),
        CONSTRAINT fk_job_groups_cancelled_group FOREIGN KEY (run_id, job_group_id)
          REFERENCES job_groups (run_id, job_group_id) ON DELETE CASCADE
      )`);

    await q.query(`
      CREATE TABLE job_group_counters (
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        n_jobs integer NOT NULL DEFAULT 0,
        n_completed integer NOT NULL DEFAULT 0,
        n_succeeded integer NOT NULL DEFAULT 0,
        n_failed integer NOT NULL DEFAULT 0,
        n_cancelled integer NOT NULL DEFAULT 0,
        CONSTRAINT pk_job_group_counters PRIMARY KEY (run_id, job_group_id),
        CONSTRAINT fk_job_group_counters_group FOREIGN KEY (run_id, job_group_id)
          REFERENCES job_groups (run_id, job_group_id) ON DELETE CASCADE,
        CONSTRAINT ck_job_group_counters_sum
          CHECK (n_completed = n_succeeded + n_failed + n_cancelled AND n_completed <= n_jobs AND n_completed >= 0)
      )`);

    await q.query(`
      CREATE TABLE jobs (
        id uuid NOT NULL,
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        job_num integer NOT NULL,
        replica_num integer NOT NULL,
        job_name varchar(128) NOT NULL,
        spec jsonb NOT NULL,
        always_run boolean NOT NULL DEFAULT false,
        status varchar(16) NOT NULL,
        termination_reason varchar(64),
        latest_submission_id uuid NOT NULL,
        latest_submission_num integer NOT NULL,
        submission_count integer NOT NULL,
        folded_submissions jsonb NOT NULL DEFAULT '{}',
        completion_counted boolean NOT NULL DEFAULT false,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT pk_jobs PRIMARY KEY (id),
        CONSTRAINT fk_jobs_run_id FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE CASCADE,
        CONSTRAINT fk_jobs_group FOREIGN KEY (run_id, job_group_id) REFERENCES job_groups (run_id, job_group_id),
        CONSTRAINT ck_jobs_status
          CHECK (status IN ('submitted', 'provisioning', 'running', 'terminating', 'done', 'failed', 'terminated',
                            'aborted'))
      )`);
    await q.query(`CREATE UNIQUE INDEX uq_jobs_run_id_job_num_replica_num ON jobs (run_id, job_num, replica_num)`);
    await q.query(`CREATE INDEX idx_jobs_run_id_job_group_id ON jobs (run_id, job_group_id, job_num, replica_num)`);

    await q.query(`
      CREATE TABLE job_submissions (
        id uuid NOT NULL,
        job_id uuid NOT NULL,
        run_id uuid NOT NULL,
        job_group_id integer NOT NULL,
        submission_num integer NOT NULL,
        status varchar(16) NOT NULL,
        termination_reason varchar(64),
        exit_status integer,
        priority integer NOT NULL DEFAULT 0,
        cpu numeric(10, 3) NOT NULL,
        memory_mib integer NOT NULL,
        gpu integer NOT NULL DEFAULT 0,
        submitted_at timestamptz NOT NULL DEFAULT now(),
        claimed_at timestamptz,
        started_at timestamptz,
        finished_at timestamptz,
        worker_id varchar(128),
        lease_expires_at timestamptz,
        last_heartbeat_at timestamptz,
        provisioning_data jsonb,
        runtime_data jsonb,
        CONSTRAINT pk_job_submissions PRIMARY KEY (id),
        CONSTRAINT fk_job_submissions_job_id FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
        CONSTRAINT ck_job_submissions_status
          CHECK (status IN ('submitted', 'provisioning', 'running', 'terminating', 'done', 'failed', 'terminated',
                            'aborted'))
      )`);
    // Newest-first reads per job walk this index backwards with a per-job LIMIT.
    await q.query(
      `CREATE UNIQUE INDEX uq_job_submissions_job_id_submission_num ON job_submissions (job_id, submission_num)`,
    );
    await q.query(
      `CREATE INDEX idx_job_submissions_queue ON job_submissions (priority DESC, submitted_at, id)
         WHERE status = 'submitted'`,
    );
    await q.query(
      `CREATE INDEX idx_job_submissions_lease ON job_submissions (lease_expires_at)
         WHERE status IN ('provisioning', 'running', 'terminating')`,
    );
    await q.query(
      `CREATE INDEX idx_job_submissions_run_id_job_group_id ON job_submissions (run_id, job_group_id)
         WHERE status = 'submitted'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of [
      'job_submissions',
      'jobs',
      'job_group_counters',
      'job_groups_cancelled',
      'job_group_self_and_ancestors',
      'job_groups',
      'runs',
    ]) {
      await q.query(`DROP TABLE ${table}`);
    }
  }
}
