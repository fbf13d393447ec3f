import { COUNTER_TOKENS } from '../../src/modules/job-groups/counter-tokens';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { dataSourceOptions } from '../../src/infra/database/data-source-options';
import { embeddedOnly, uniqueName } from './test-app';
import { workerDatabaseUrl } from './test-databases';

/*
 * The repository tier: repositories called directly on a TypeORM DataSource over this jest worker's database (no
 * Nest app), with rows seeded in plain SQL here, so a repository's statement is checked on its own.
 */

/** A DataSource over this jest worker's database, built as the app builds its own (one connection when embedded). */
export async function openDataSource(): Promise<DataSource> {
  const url = await workerDatabaseUrl();
  const ds = new DataSource(dataSourceOptions({ url, poolSize: embeddedOnly ? 1 : 4, embedded: embeddedOnly }));
  await ds.initialize();
  return ds;
}

/** A plain pg connection of its own to the same database (another session: for lock and concurrency checks). */
export async function otherSession(): Promise<Client> {
  const client = new Client({ connectionString: await workerDatabaseUrl(), application_name: 'runplane-test-other' });
  await client.connect();
  return client;
}

/** Runs `fn` in a transaction that is always rolled back: the repository's effects are seen inside it, then gone. */
export async function inRolledBackTransaction<T>(ds: DataSource, fn: (m: EntityManager) => Promise<T>): Promise<T> {
  const runner = ds.createQueryRunner();
  await runner.connect();
  await runner.startTransaction();
  try {
    return await fn(runner.manager);
  } finally {
    await runner.rollbackTransaction();
    await runner.release();
  }
}

/** An open transaction the test commits or rolls back itself. */
export async function openTransaction(ds: DataSource): Promise<QueryRunner> {
  const runner = ds.createQueryRunner();
  await runner.connect();
  await runner.startTransaction();
  return runner;
}

/** Waits until some session of this database waits for a lock (so the test knows a statement is blocked). */
export async function untilSomeoneWaitsForALock(observer: Client, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const { rows } = await observer.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`,
    );
    if (rows[0].n > 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('no session ever waited for a lock');
}

/** Whether another session can lock the rows `sql` selects at once (it adds FOR UPDATE NOWAIT). */
export async function lockableNow(other: Client, sql: string, params: unknown[]): Promise<boolean> {
  await other.query('BEGIN');
  try {
    await other.query(`${sql} FOR UPDATE NOWAIT`, params);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === '55P03') return false; // lock_not_available
    throw err;
  } finally {
    await other.query('ROLLBACK');
  }
}

export interface SeededRun {
  userId: string;
  projectId: string;
  runId: string;
}

/**
 * A user, a project and a run with a group tree, in plain SQL: `parents` maps each group below the root to its
 * parent (e.g. {1: 0, 2: 1, 3: 0}); each group gets its closure rows and zeroed counters.
 */
export async function seedRun(
  m: EntityManager | DataSource,
  parents: Record<number, number> = {},
  options: { priority?: number; cancelAfterNFailures?: Record<number, number> } = {},
): Promise<SeededRun> {
  const [user] = await m.query(`INSERT INTO users (name, global_role) VALUES ($1, 'user') RETURNING id`, [
    uniqueName('repo'),
  ]);
  const [project] = await m.query(`INSERT INTO projects (name, created_by) VALUES ($1, $2) RETURNING id`, [
    uniqueName('repo'),
    user.id,
  ]);
  const [run] = await m.query(
    `INSERT INTO runs (project_id, user_id, run_name, priority, spec) VALUES ($1, $2, $3, $4, '{}') RETURNING id`,
    [project.id, user.id, uniqueName('run'), options.priority ?? 0],
  );
  const chainOf = (g: number): number[] => (g === 0 ? [0] : [g, ...chainOf(parents[g])]);
  const groups = [0, ...Object.keys(parents).map(Number)].sort((a, b) => a - b);
  for (const g of groups) {
    const chain = chainOf(g);
    await m.query(
      `INSERT INTO job_groups (run_id, job_group_id, parent_id, depth, cancel_after_n_failures, state)
       VALUES ($1, $2, $3, $4, $5, 'running')`,
      [run.id, g, g === 0 ? null : parents[g], chain.length - 1, options.cancelAfterNFailures?.[g] ?? null],
    );
    await m.query(
      `INSERT INTO job_group_self_and_ancestors (run_id, job_group_id, ancestor_id, level)
       SELECT $1, $2, a, l - 1 FROM unnest($3::int[]) WITH ORDINALITY AS c(a, l)`,
      [run.id, g, chain],
    );
    await m.query(
      `INSERT INTO job_group_counters (run_id, job_group_id, token) SELECT $1, $2, generate_series(0, $3::int - 1)`,
      [run.id, g, COUNTER_TOKENS],
    );
  }
  return { userId: user.id, projectId: project.id, runId: run.id };
}

export interface SeededJob {
  jobId: string;
  submissionId: string;
}

/**
 * A job of `runId` in group `jobGroupId` with its submission 0, in plain SQL; the job's facts point at it.
 * `submission` sets the submission's columns (status, worker_id, claimed_by_user_id, ...).
 */
export async function seedJob(
  m: EntityManager | DataSource,
  runId: string,
  jobGroupId: number,
  jobNum: number,
  submission: { status?: string; workerId?: string; claimedByUserId?: string; cpu?: number } = {},
): Promise<SeededJob> {
  const jobId = randomUUID();
  const submissionId = randomUUID();
  const status = submission.status ?? 'submitted';
  const cpu = submission.cpu ?? 1;
  await m.query(
    `INSERT INTO jobs (id, run_id, job_group_id, job_num, replica_num, job_name, spec, status, latest_submission_id,
                       latest_submission_num, submission_count)
     VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8, 0, 1)`,
    [
      jobId,
      runId,
      jobGroupId,
      jobNum,
      `job-${jobNum}`,
      JSON.stringify({ commands: ['true'], resources: { cpu, memory_mib: 1024 } }),
      status,
      submissionId,
    ],
  );
  await m.query(
    `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, cpu, memory_mib, gpu,
                                  worker_id, claimed_by_user_id, claimed_at, lease_expires_at)
     VALUES ($1, $2, $3, $4, 0, $5, $6, 1024, 0, $7::varchar, $8::uuid,
             CASE WHEN $7::varchar IS NULL THEN NULL ELSE now() END,
             CASE WHEN $7::varchar IS NULL THEN NULL ELSE now() + interval '1 minute' END)`,
    [
      submissionId,
      jobId,
      runId,
      jobGroupId,
      status,
      cpu,
      submission.workerId ?? null,
      submission.claimedByUserId ?? null,
    ],
  );
  return { jobId, submissionId };
}
