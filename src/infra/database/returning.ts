import type { EntityManager } from 'typeorm';

/**
 * Rows of an `UPDATE`/`DELETE ... RETURNING` (TypeORM hands those back as `[rows, rowCount]`, unlike SELECT and
 * INSERT). Always parameterised.
 */
export async function returning<T>(m: EntityManager, sql: string, params: unknown[]): Promise<T[]> {
  const result: unknown = await m.query(sql, params);
  if (Array.isArray(result) && result.length === 2 && Array.isArray(result[0]) && typeof result[1] === 'number')
    return result[0] as T[];
  return result as T[];
}
