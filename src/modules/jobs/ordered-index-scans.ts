import type { EntityManager } from 'typeorm';

/** The plans a statement run by withOrderedIndexScans may not use. */
const PLANNER_SETTINGS = ['enable_bitmapscan', 'enable_sort', 'enable_seqscan'] as const;

/**
 * Runs one read with bitmap scans, sorts and sequential scans switched off, which leaves an ordered index scan as
 * the only plan worth having for a `LATERAL (... ORDER BY <index order> LIMIT n)` per key. With skewed statistics
 * (most runs or jobs small, a few huge) the planner was seen to prefer a bitmap scan of a key's every row plus a
 * sort, reading a deep history or a huge run whole to show a few rows. The settings are local to a transaction of
 * the statement's own, or put back as they were once it has run inside the caller's.
 */
export async function withOrderedIndexScans<T>(m: EntityManager, read: (m: EntityManager) => Promise<T>): Promise<T> {
  const off = `SELECT ${PLANNER_SETTINGS.map((name) => `set_config('${name}', 'off', true)`).join(', ')}`;
  if (!m.queryRunner?.isTransactionActive) {
    return m.transaction(async (inner) => {
      await inner.query(off);
      return read(inner);
    });
  }
  const [before] = await m.query(
    `SELECT ${PLANNER_SETTINGS.map((name) => `current_setting('${name}') AS ${name}`).join(', ')}`,
  );
  await m.query(off);
  const out = await read(m);
  await m.query(
    `SELECT ${PLANNER_SETTINGS.map((name, i) => `set_config('${name}', $${i + 1}, true)`).join(', ')}`,
    PLANNER_SETTINGS.map((name) => (before as Record<string, string>)[name]),
  );
  return out;
}
