import { DataSource, Migration, MigrationExecutor } from 'typeorm';

/** Any constant works; it only has to be the same for every runplane instance sharing a database. */
const MIGRATIONS_LOCK_KEY = 0x72706d67; // 'rpmg'

/**
 * Runs pending migrations under a session advisory lock, so instances starting together take turns and the
 * later ones find nothing to do. Lock and migrations share one connection (the embedded database has only one).
 */
export async function runMigrationsLocked(dataSource: DataSource): Promise<Migration[]> {
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
