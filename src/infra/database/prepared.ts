import type { PoolClient } from 'pg';
import { EntityManager, QueryFailedError } from 'typeorm';
import { queueCommit } from './commit-ahead';

/**
 * Runs a hot-path statement as a named prepared statement on the caller's transaction connection. PostgreSQL then
 * parses it once per connection and, once a generic plan proves as good, plans it once too: on the lifecycle path
 * parsing and planning cost more than executing (the billing accrual: 0.6 ms of 0.9 ms). `name` identifies the
 * text; one name, one text (on the embedded database, see data-source-options, the statement goes unnamed). With a
 * transaction's EntityManager it runs on that transaction's connection; with the data source's, on a pooled one.
 * Errors come back as TypeORM's QueryFailedError, so transaction retries and the error filter treat them as any
 * other query's. Always parameterised; returns the rows (RETURNING rows included). With `commitAfter`, the statement
 * is its transaction's last: COMMIT is queued right behind it (commit-ahead.ts; a transaction's manager only).
 */
export async function preparedQuery<T>(
  m: EntityManager,
  name: string,
  text: string,
  values: unknown[],
  { commitAfter = false }: { commitAfter?: boolean } = {},
): Promise<T[]> {
  if (commitAfter && !m.queryRunner) throw new Error(`${name}: commitAfter needs a transaction's manager`);
  // Outside a transaction (the data source's own manager), a pooled connection for this one statement.
  const runner = m.queryRunner ?? m.connection.createQueryRunner();
  // On a transaction's connection the statement is queued before this returns (no await first: TypeORM's own
  // field, which connect() would answer only a tick later), so a caller may queue the next behind it without waiting
  // for its answer, in a known order (JobFinisher).
  const connected = (runner as { databaseConnection?: PoolClient }).databaseConnection;
  const client = connected ?? ((await runner.connect()) as PoolClient);
  const named = (m.connection.options.extra as { namedStatements?: boolean } | undefined)?.namedStatements !== false;
  try {
    const answer = client.query<T & object>(named ? { name, text, values } : { text, values });
    if (commitAfter) queueCommit(client);
    const result = await answer;
    return result.rows;
  } catch (err) {
    throw new QueryFailedError(text, values, err as Error);
  } finally {
    if (!m.queryRunner) await runner.release();
  }
}
