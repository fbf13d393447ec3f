import { EmbeddedPostgres } from '../../src/infra/database/embedded-postgres';
import { PgBouncer } from './cluster';
import {
  dropStaleDatabases,
  embeddedUrlVariable,
  migrate,
  OWN_DATABASES,
  templateName,
  urlFor,
  withAdminClient,
} from './test-databases';
import { required } from '../../src/common/required';

/** Runs once per jest run, outside the test sandbox: prepares the migrated template (or the embedded database). */
export default async function globalSetup(): Promise<void> {
  process.env.RUNPLANE_TEST_RUN_ID = String(process.pid);
  const adminUrl = required(process.env.RUNPLANE_TEST_ADMIN_URL, 'RUNPLANE_TEST_ADMIN_URL (set by jest.config.js)');
  if (process.env.RUNPLANE_TEST_EMBEDDED === '1') {
    process.stdout.write(
      `\nrunplane tests: no PostgreSQL server answered at ${new URL(adminUrl).host}; running on the EMBEDDED ` +
        `database (PGlite), one worker; tests that need real concurrency are skipped.\n`,
    );
    const started: EmbeddedPostgres[] = [];
    (globalThis as { __embedded?: EmbeddedPostgres[] }).__embedded = started;
    const start = async (name: string) => {
      const embedded = await EmbeddedPostgres.start({ dataDir: `memory://runplane-test-${name}` });
      started.push(embedded);
      await migrate(embedded.url, true);
      return embedded.url;
    };
    process.env.RUNPLANE_TEST_EMBEDDED_URL = await start('shared');
    for (const own of OWN_DATABASES) process.env[embeddedUrlVariable(own)] = await start(own);
    return;
  }
  process.stdout.write(
    `\nrunplane tests: PostgreSQL server at ${new URL(adminUrl).host}; one database per jest worker, cloned from a ` +
      `migrated template.\n`,
  );
  await withAdminClient(adminUrl, async (c) => {
    await dropStaleDatabases(c);
    await c.query(`CREATE DATABASE "${templateName()}"`);
  });
  await migrate(urlFor(adminUrl, templateName()));
  await startPgBouncerIfAsked(adminUrl);
}

/**
 * RUNPLANE_TEST_PGBOUNCER=transaction|session: every app the tests make in process (createTestApp) reaches its
 * database through a PgBouncer in that mode, started here (see appDatabaseUrl). The `multi` CI stage runs the whole
 * suite so, in transaction mode.
 */
async function startPgBouncerIfAsked(adminUrl: string): Promise<void> {
  const mode = process.env.RUNPLANE_TEST_PGBOUNCER;
  if (!mode) return;
  if (mode !== 'transaction' && mode !== 'session') throw new Error('RUNPLANE_TEST_PGBOUNCER: transaction or session');
  const target = new URL(adminUrl);
  const bouncer = await PgBouncer.start({ host: target.hostname, port: Number(target.port || 5432) }, mode);
  (globalThis as { __pgbouncer?: PgBouncer }).__pgbouncer = bouncer;
  process.env.RUNPLANE_TEST_PGBOUNCER_PORT = String(bouncer.port);
  process.stdout.write(
    `runplane tests: apps reach PostgreSQL through ${await PgBouncer.version()}, ${mode} pooling.\n`,
  );
}
