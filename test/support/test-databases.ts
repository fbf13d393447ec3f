import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../../src/infra/database/data-source-options';
import { runMigrationsLocked } from '../../src/infra/database/migrations-runner';
import { required } from '../../src/common/required';

/**
 * Test databases on a real server: one migrated template per jest run (`rp<pid>_tpl`), and one clone of it per
 * jest worker (`rp<pid>_w<N>`), made on first use. Names carry the run's pid so concurrent runs never collide.
 */
export const runPrefix = () => `rp${process.env.RUNPLANE_TEST_RUN_ID}`;
export const templateName = () => `${runPrefix()}_tpl`;

export function urlFor(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export async function withAdminClient<T>(adminUrl: string, fn: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function migrate(url: string, embedded = false): Promise<void> {
  const ds = new DataSource(dataSourceOptions({ url, poolSize: 1, embedded }));
  await ds.initialize();
  try {
    await runMigrationsLocked(ds);
  } finally {
    await ds.destroy();
  }
}

/** Drops the databases of earlier runs whose jest process is gone. */
export async function dropStaleDatabases(c: Client): Promise<void> {
  const { rows } = await c.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datname ~ '^rp[0-9]+_(tpl|w[0-9]+(_[a-z0-9]+)?)$'`,
  );
  for (const { datname } of rows) {
    const pid = Number(required(/^rp(\d+)_/.exec(datname), `the pid in ${datname}`)[1]);
    if (pid !== process.pid && isAlive(pid)) continue;
    await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Test files that check whole-database properties and so get a database of their own. On the embedded database
 * (PGlite can only start outside jest's sandbox) global setup starts one per name.
 */
export const OWN_DATABASES = [
  'billing',
  'bigruns',
  'dag',
  'dagscale',
  'dagcancel',
  'dagbad',
  'lifecycle',
  'workers',
  'workload',
  'bounded',
  'outage',
  'maxdur',
  'openapi',
  'resources',
  'claims',
  'reportbatch',
  'events',
  'follow',
  'executor',
  'recovery',
  'serveworker',
  'heartbeats',
  'workerlogs',
  'cli',
  'terminal',
  'console',
  'tokens',
  'schema',
  'commitahead',
  'started',
] as const;
export type OwnDatabase = (typeof OWN_DATABASES)[number];

export const embeddedUrlVariable = (own: string) => `RUNPLANE_TEST_EMBEDDED_URL_${own.toUpperCase()}`;

/**
 * The database of this jest worker, cloned from the template the first time any test file of it asks. A test
 * file that checks whole-database properties (the invariants) asks for one of its own with `own`.
 */
export async function workerDatabaseUrl(own?: OwnDatabase): Promise<string> {
  if (process.env.RUNPLANE_TEST_EMBEDDED === '1') {
    if (!own) return required(process.env.RUNPLANE_TEST_EMBEDDED_URL, 'RUNPLANE_TEST_EMBEDDED_URL');
    const url = process.env[embeddedUrlVariable(own)];
    if (!url) throw new Error(`no embedded database for '${own}': add it to OWN_DATABASES`);
    return url;
  }
  const adminUrl = required(process.env.RUNPLANE_TEST_ADMIN_URL, 'RUNPLANE_TEST_ADMIN_URL (set by jest.config.js)');
  const name = `${runPrefix()}_w${process.env.JEST_WORKER_ID ?? '1'}${own ? `_${own}` : ''}`;
  await withAdminClient(adminUrl, async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount) return;
    try {
      await c.query(`CREATE DATABASE "${name}" TEMPLATE "${templateName()}" STRATEGY FILE_COPY`);
      // Test data is disposable: don't wait for fsync on commit.
      await c.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
    } catch (err) {
      if ((err as { code?: string }).code !== '42P04') throw err; // created meanwhile
    }
  });
  return urlFor(adminUrl, name);
}

/**
 * The environment an in-process app uses for `url`: as is, or through the run's PgBouncer (RUNPLANE_TEST_PGBOUNCER,
 * see global-setup); in transaction mode without named statements, and LISTEN on a direct session.
 */
export function appDatabaseEnv(url: string): Record<string, string> {
  const port = process.env.RUNPLANE_TEST_PGBOUNCER_PORT;
  if (!port) return { DATABASE_URL: url };
  const through = new URL(url);
  through.port = port;
  return process.env.RUNPLANE_TEST_PGBOUNCER === 'transaction'
    ? { DATABASE_URL: through.toString(), DATABASE_NAMED_STATEMENTS: 'false', DATABASE_SESSION_URL: url }
    : { DATABASE_URL: through.toString() };
}
