import { Logger, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource, DataSourceOptions } from 'typeorm';
import { databaseFailure } from '../../common/errors/database-unavailable';
import { required } from '../../common/required';
import { Env } from '../../config/env';
import { dataSourceOptions } from './data-source-options';
import { EmbeddedPostgres } from './embedded-postgres';
import { runMigrationsLocked } from './migrations-runner';

const logger = new Logger('Database');
/** Embedded servers by URL (unique: each listens on its own port), so the data source can stop its server last. */
const embeddedByUrl = new Map<string, EmbeddedPostgres>();

/**
 * TypeORM on PostgreSQL: the server named by DATABASE_URL, or else an embedded PGlite in RUNPLANE_DATA_DIR.
 * Migrations run at start under an advisory lock; the embedded database stops only after the pool has closed.
 */
@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      inject: [Env],
      useFactory: async (env: Env) => {
        const embedded = env.DATABASE_URL ? undefined : await startEmbedded(env.RUNPLANE_DATA_DIR);
        const options = {
          ...dataSourceOptions({
            url: env.DATABASE_URL ?? required(embedded, 'the embedded database').url,
            poolSize: embedded || env.DATABASE_EMBEDDED ? 1 : env.DATABASE_POOL_SIZE,
            embedded: !!embedded || env.DATABASE_EMBEDDED,
            idleSeconds: env.DATABASE_POOL_IDLE_SECONDS,
            namedStatements: env.DATABASE_NAMED_STATEMENTS,
            statementTimeoutMs: env.DATABASE_STATEMENT_TIMEOUT_MS,
          }),
          autoLoadEntities: true,
          // A server at DATABASE_URL may be starting alongside us: a refused or dropped connection is tried again for
          // a few seconds. A wrong database name or password is not (nor is the embedded database): the start fails
          // at once, in one line (see startup-failure.ts).
          retryAttempts: 5,
          retryDelay: 1000,
          toRetry: (err: unknown) => !!env.DATABASE_URL && databaseFailure(err) === 'connection_lost',
        };
        if (embedded) embeddedByUrl.set(embedded.url, embedded);
        return options;
      },
      dataSourceFactory: async (options) => openDataSource(required(options, 'the data source options')),
    }),
  ],
})
export class DatabaseModule {}

async function openDataSource(options: DataSourceOptions): Promise<DataSource> {
  const url = (options as { url?: string }).url;
  const embedded = url ? embeddedByUrl.get(url) : undefined;
  if (url) embeddedByUrl.delete(url);
  const dataSource = new DataSource(options);
  teachTypes(dataSource);
  try {
    await dataSource.initialize();
    const applied = await runMigrationsLocked(dataSource);
    if (applied.length > 0) logger.log(`applied migrations: ${applied.map((m) => m.name).join(', ')}`);
  } catch (err) {
    if (dataSource.isInitialized) await dataSource.destroy();
    await embedded?.stop();
    throw err;
  }
  if (embedded) {
    const destroy = dataSource.destroy.bind(dataSource);
    dataSource.destroy = async () => {
      try {
        await destroy();
      } finally {
        await embedded.stop();
      }
    };
  }
  return dataSource;
}

/**
 * Column types TypeORM's PostgreSQL driver does not list but our entities use, so that entities and migrations can
 * agree on them: `xid8` (events.tx_id, a transaction id; see EventsRepository.read).
 */
export function teachTypes(dataSource: DataSource): void {
  const supported = dataSource.driver.supportedDataTypes as string[];
  if (!supported.includes('xid8')) supported.push('xid8');
}

async function startEmbedded(dataDir: string): Promise<EmbeddedPostgres> {
  const started = Date.now();
  const embedded = await EmbeddedPostgres.start({ dataDir });
  logger.log(`embedded PostgreSQL (PGlite) in ${dataDir} ready in ${Date.now() - started} ms`);
  return embedded;
}
