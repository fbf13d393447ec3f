import { Client } from 'pg';
import { DataSource, Migration, MigrationExecutor } from 'typeorm';

/** Any constant works; it only has to be the same for every runplane instance sharing a database. */
const MIGRATIONS_LOCK_KEY = 0x72706d67; // 'rpmg'

/**
 * Runs pending migrations under an advisory lock, so instances starting together take turns and the later ones find
 * nothing to do. On a server the lock is a transaction lock held by a connection of its own for as long as the
 * migrations run: a session lock would not survive a transaction-pooling PgBouncer (taken on one server connection,
 * released on another, left behind for every later start to wait on). The embedded database has one connection:
 * there lock and migrations share it (and no pooler is in between).
 */
export async function runMigrationsLocked(dataSource: DataSource): Promise<Migration[]> {
  const embedded = (dataSource.options.extra as { embedded?: boolean } | undefined)?.embedded === true;
  const url = (dataSource.options as { url?: string }).url;
  if (embedded || !url) return runMigrationsSessionLocked(dataSource);
  const lock = new Client({ connectionString: url, application_name: 'runplane-migrations-lock' });
  lock.on('error', () => undefined); // a lost lock connection fails the next query, below
  await lock.connect();
  try {
    await lock.query('BEGIN');
    await lock.query('SELECT pg_advisory_xact_lock($1)', [MIGRATIONS_LOCK_KEY]);
    const runner = dataSource.createQueryRunner();
    try {
      const executor = new MigrationExecutor(dataSource, runner);
      executor.transaction = 'each';
      return await executor.executePendingMigrations();
    } finally {
      await runner.release();
    }
  } finally {
    await lock.end().catch(() => undefined); // ends the transaction, and the lock with it
  }
}

async function runMigrationsSessionLocked(dataSource: DataSource): Promise<Migration[]> {
  const runner = dataSource.createQueryRunner();
  await runner.connect();
  try {
    await runner.query('SELECT pg_advisory_lock($1)', [MIGRATIONS_LOCK_KEY]);
    try {
      const executor = new MigrationExecutor(dataSource, runner);
      executor.transaction = 'each';
      return await executor.executePendingMigrations();
    } finally {
      await runner.query('SELECT pg_advisory_unlock($1)', [MIGRATIONS_LOCK_KEY]);
    }
  } finally {
    await runner.release();
  }
}

/** Migrations not yet applied (empty when the schema is current). */
export async function pendingMigrations(dataSource: DataSource): Promise<string[]> {
  const runner = dataSource.createQueryRunner();
  try {
    const executor = new MigrationExecutor(dataSource, runner);
    return (await executor.getPendingMigrations()).map((m) => m.name);
  } finally {
    await runner.release();
  }
}
