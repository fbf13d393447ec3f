import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS } from '../../migrations';
import { createTestApp, TestApp } from '../support/test-app';

describe('schema: entities and migrations agree', () => {
  let t: TestApp;
  beforeAll(async () => {
    // Its own database: rolling every migration back needs tables the other specs left no rows in.
    t = await createTestApp({}, { ownDatabase: 'schema' });
  });
  afterAll(() => t.close());

  it('the migrated schema needs no change to match the entities', async () => {
    const sql = await t.dataSource.driver.createSchemaBuilder().log();
    expect(sql.upQueries.map((q) => q.query)).toEqual([]);
  });

  it('every migration file is listed, named <timestamp>-<PascalVerbNoun>.ts, and has a down()', () => {
    const files = readdirSync(join(__dirname, '../../migrations')).filter((f) => f !== 'index.ts');
    for (const f of files) expect(f).toMatch(/^\d{13}-[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+\.ts$/);
    expect(MIGRATIONS.map((m) => m.name).sort()).toEqual(
      files.map((f) => f.replace(/^(\d+)-(\w+)\.ts$/, '$2$1')).sort(),
    );
    for (const M of MIGRATIONS) expect(typeof new M().down).toBe('function');
  });

  it('names every index and constraint explicitly (no TypeORM hashes)', async () => {
    const rows: { name: string }[] = await t.dataSource.query(`
      SELECT conname AS name FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
       WHERE n.nspname = 'public' AND c.conrelid <> 'migrations'::regclass AND c.contype <> 'n' -- PG18 lists NOT NULLs
      UNION ALL
      SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND tablename <> 'migrations'`);
    const hashed = rows
      .map((r) => r.name)
      .filter((n) => /^(PK|FK|UQ|IDX|REL|CHK)_[0-9a-f]{20,}/.test(n) || !/^(pk|fk|uq|idx|ck|ex)_/.test(n));
    expect(hashed).toEqual([]);
  });

  it("leaves a fifth of each jobs page free, so the updates of a job's life stay HOT", async () => {
    // A job's updates change no indexed column; with room on its page each is written without index entries.
    const rows: { options: string[] | null }[] = await t.dataSource.query(
      `SELECT reloptions AS options FROM pg_class WHERE oid = 'jobs'::regclass`,
    );
    expect(rows[0].options).toEqual(['fillfactor=80']);
    const indexed: { column: string }[] = await t.dataSource.query(
      `SELECT DISTINCT a.attname AS column
         FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
        WHERE i.indrelid = 'jobs'::regclass
        ORDER BY 1`,
    );
    // Were an index to hold a column the lifecycle changes (status, counts), or a predicate or an expression over
    // one, those updates could not be HOT whatever the room: this list says what may be indexed.
    expect(indexed.map((r) => r.column)).toEqual(['id', 'job_group_id', 'job_num', 'replica_num', 'run_id']);
    const [{ n }]: { n: number }[] = await t.dataSource.query(
      `SELECT count(*)::int AS n FROM pg_index
        WHERE indrelid = 'jobs'::regclass AND (indpred IS NOT NULL OR indexprs IS NOT NULL)`,
    );
    expect(n).toBe(0);
  });

  it('migrations roll back to an empty schema and forward again', async () => {
    const runner = t.dataSource.createQueryRunner();
    try {
      // A scratch schema would need search_path games; instead undo and redo every migration in one transaction.
      await runner.startTransaction();
      for (const M of [...MIGRATIONS].reverse()) await new M().down(runner);
      const left = await runner.query(
        `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'migrations'`,
      );
      expect(left).toEqual([]);
      for (const M of MIGRATIONS) await new M().up(runner);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
