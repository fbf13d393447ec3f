import { DataSource, EntityManager } from 'typeorm';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { RunStatusService } from '../../src/modules/runs/run-status.service';
import type { TestApp } from './test-app';

export interface Measured {
  /** Statements sent by pg clients (everything, including transaction control). */
  client: number;
  /**
   * Statements through TypeORM's PostgresQueryRunner.query (query builders, repositories, manager and
   * DataSource.query).
   */
  runner: number;
  /** Of those, the ones issued through DataSource.query / EntityManager.query. */
  viaDataSource: number;
  viaManager: number;
  /** Rows the database returned over all statements. */
  rows: number;
  sql: string[];
  /** The statements with their parameters, to EXPLAIN them afterwards. */
  statements: { sql: string; params: unknown[] }[];
}

export type QueryFn = (this: unknown, ...args: unknown[]) => unknown;

export async function measure(
  t: Pick<TestApp, 'dataSource'> & Partial<Pick<TestApp, 'app'>>,
  fn: () => Promise<unknown>,
): Promise<Measured> {
  // Statuses earlier commits moved are settled after their answers: not the measured work's statements.
  await t.app?.get(RunStatusService).settled();
  const pgClientProto = (t.dataSource.driver as unknown as { postgres: { Client: { prototype: { query: QueryFn } } } })
    .postgres.Client.prototype;
  const original = pgClientProto.query;
  const out: Measured = { client: 0, runner: 0, viaDataSource: 0, viaManager: 0, rows: 0, sql: [], statements: [] };
  const pending: Promise<unknown>[] = [];
  const clientSpy = jest.spyOn(pgClientProto, 'query').mockImplementation(function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string; values?: unknown[] } | undefined;
    const text = typeof first === 'string' ? first : (first?.text ?? '<query object>');
    // Followers' wake-ups, sent a few ms after earlier commits (EventsService), are not the measured work's.
    if (text.startsWith('SELECT pg_notify(')) return original.apply(this, args);
    const params = Array.isArray(args[1])
      ? (args[1] as unknown[])
      : typeof first === 'object' && Array.isArray(first.values)
        ? first.values
        : [];
    out.sql.push(text);
    out.statements.push({ sql: text, params });
    const result = original.apply(this, args);
    if (
      result &&
      typeof (result as { on?: unknown }).on === 'function' &&
      typeof (result as Promise<unknown>).then !== 'function'
    ) {
      // A submitted Query whose rows are streamed (forEachRow): count them as they go by.
      const streamed = result as { on: (event: string, fn: (...a: unknown[]) => void) => void };
      pending.push(
        new Promise<void>((resolve) => {
          streamed.on('row', () => void out.rows++);
          streamed.on('end', () => resolve());
          streamed.on('error', () => resolve());
        }),
      );
    } else if (result && typeof (result as Promise<unknown>).then === 'function') {
      pending.push(
        (result as Promise<{ rows?: unknown[] } | undefined>).then(
          (r) => {
            out.rows += Array.isArray(r?.rows) ? r.rows.length : 0;
          },
          () => undefined,
        ),
      );
    }
    return result;
  });
  const runnerSpy = jest.spyOn(PostgresQueryRunner.prototype, 'query');
  const dataSourceSpy = jest.spyOn(DataSource.prototype, 'query');
  const managerSpy = jest.spyOn(EntityManager.prototype, 'query');
  try {
    await fn();
    await Promise.all(pending);
    out.client = clientSpy.mock.calls.length;
    out.runner = runnerSpy.mock.calls.length;
    out.viaDataSource = dataSourceSpy.mock.calls.length;
    out.viaManager = managerSpy.mock.calls.length;
  } finally {
    clientSpy.mockRestore();
    runnerSpy.mockRestore();
    dataSourceSpy.mockRestore();
    managerSpy.mockRestore();
  }
  return out;
}

export interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** Where EXPLAIN runs: a DataSource, or the EntityManager of a transaction the measured statements ran in. */
export interface Explainer {
  query(sql: string, params?: unknown[]): Promise<{ 'QUERY PLAN': unknown }[]>;
  /** A DataSource's or an EntityManager's: to replay a statement's transaction-local planner settings. */
  transaction?<T>(run: (m: Explainer) => Promise<T>): Promise<T>;
}

/**
 * Rows of `relation` the database actually visited (returned by scans plus those scanned and thrown away by
 * filters) over every statement of a measured request that names it, from EXPLAIN ANALYZE of the very statements it
 * sent, run again on `db` (a statement that writes writes again: run those in a transaction rolled back after).
 */
export async function rowsVisited(
  db: Explainer,
  m: Measured,
  relation: string,
): Promise<{ visited: number; statements: number }> {
  let visited = 0;
  let statements = 0;
  const walkPlan = (node: PlanNode) => {
    if (node['Relation Name'] === relation) {
      const loops = node['Actual Loops'] ?? 1;
      visited +=
        ((node['Actual Rows'] ?? 0) +
          (node['Rows Removed by Filter'] ?? 0) +
          (node['Rows Removed by Index Recheck'] ?? 0)) *
        loops;
    }
    for (const child of node.Plans ?? []) walkPlan(child);
  };
  // Planner settings the measured work set for its transaction (withOrderedIndexScans): replayed around the EXPLAIN,
  // or it would judge a plan the statement never ran with.
  let settings: { sql: string; params: unknown[] } | null = null;
  for (const st of m.statements) {
    if (/^\s*SELECT set_config\(/i.test(st.sql)) settings = st;
    if (/^\s*(COMMIT|ROLLBACK)\b/i.test(st.sql)) settings = null;
    if (!new RegExp(`\\b${relation}\\b`, 'i').test(st.sql) || !/^\s*(WITH|SELECT)/i.test(st.sql)) continue;
    statements++;
    const set = settings;
    const explain = async (q: Explainer) => {
      if (set) await q.query(set.sql, set.params);
      return q.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${st.sql}`, st.params);
    };
    const [row] = set && db.transaction ? await db.transaction(explain) : await explain(db);
    const plan = (typeof row['QUERY PLAN'] === 'string' ? JSON.parse(row['QUERY PLAN']) : row['QUERY PLAN']) as {
      Plan: PlanNode;
    }[];
    walkPlan(plan[0].Plan);
  }
  return { visited, statements };
}

/** rowsVisited of job_submissions. */
export function submissionRowsVisited(
  t: Pick<TestApp, 'dataSource'>,
  m: Measured,
): Promise<{ visited: number; statements: number }> {
  return rowsVisited(t.dataSource, m, 'job_submissions');
}
