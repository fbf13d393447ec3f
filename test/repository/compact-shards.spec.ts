import { randomUUID } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import { BillingRepository } from '../../src/modules/billing/billing.repository';
import { inRolledBackTransaction, openDataSource } from '../support/repository-tier';
import { required } from '../../src/common/required';

/**
 * Shard compaction: aggregate rows of one (scope, resource) spread over several tokens are folded into one row on
 * token 0, the sums kept. Each case runs in a transaction rolled back at the end; it first folds whatever the
 * database already holds spread, so the rows it then writes are the only ones left to fold.
 */
describe('BillingRepository.compactShards', () => {
  let ds: DataSource;
  let repo: BillingRepository;
  let cpu: number;
  let memory: number;
  beforeAll(async () => {
    ds = await openDataSource();
    repo = new BillingRepository(ds);
    const rows: { id: number; name: string }[] = await ds.query(`SELECT id, name FROM resources WHERE version = 1`);
    cpu = required(
      rows.find((r) => r.name === 'cpu'),
      'cpu',
    ).id;
    memory = required(
      rows.find((r) => r.name === 'memory'),
      'memory',
    ).id;
  });
  afterAll(() => ds.destroy());

  const EVERYTHING = 1_000_000;

  const insert = async (m: EntityManager, table: string, rows: Record<string, unknown>[]) => {
    for (const r of rows) {
      const columns = Object.keys(r);
      await m.query(
        `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
        Object.values(r),
      );
    }
  };

  /** Rows of the given scopes as stored: keys, token, usage (exact text). */
  const runRows = (m: EntityManager, runIds: string[]) =>
    m.query(
      `SELECT run_id, resource_id, token, usage::text FROM billing_run_usage WHERE run_id = ANY($1::uuid[])
        ORDER BY run_id, resource_id, token`,
      [runIds],
    );
  const groupRows = (m: EntityManager, runId: string) =>
    m.query(
      `SELECT job_group_id, resource_id, token, usage::text FROM billing_group_usage WHERE run_id = $1
        ORDER BY job_group_id, resource_id, token`,
      [runId],
    );
  const dailyRows = (m: EntityManager, projectId: string) =>
    m.query(
      `SELECT user_id, to_char(day, 'YYYY-MM-DD') AS day, resource_id, token, usage::text FROM billing_daily_usage
        WHERE project_id = $1 ORDER BY user_id, day, resource_id, token`,
      [projectId],
    );
  const totals = async (m: EntityManager) =>
    (
      await m.query(`SELECT (SELECT SUM(usage) FROM billing_run_usage)::text AS run,
                            (SELECT SUM(usage) FROM billing_group_usage)::text AS grp,
                            (SELECT SUM(usage) FROM billing_daily_usage)::text AS daily,
                            (SELECT SUM(usage) FROM billing_job_usage)::text AS job`)
    )[0];

  it('folds each spread (scope, resource) into one token-0 row, the exact sum; rows on one token stay', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      await repo.compactShards(m, EVERYTHING);
      const [r1, r2] = [randomUUID(), randomUUID()];
      const project = randomUUID();
      const [u1, u2] = [randomUUID(), randomUUID()];
      const run = (run_id: string, resource_id: number, token: number, usage: string) => ({
        run_id,
        resource_id,
        token,
        usage,
      });
      await insert(m, 'billing_run_usage', [
        run(r1, cpu, 0, '10.000000000000000001'),
        run(r1, cpu, 5, '2.5'),
        run(r1, cpu, 63, '7'),
        run(r1, memory, 3, '4'), // on one token only: left as it is
        run(r2, cpu, 1, '1.25'),
        run(r2, cpu, 2, '0.75'),
      ]);
      await insert(m, 'billing_group_usage', [
        { run_id: r1, job_group_id: 0, resource_id: cpu, token: 4, usage: '3' },
        { run_id: r1, job_group_id: 0, resource_id: cpu, token: 8, usage: '0.5' },
        { run_id: r1, job_group_id: 1, resource_id: cpu, token: 8, usage: '0.5' },
      ]);
      await insert(m, 'billing_daily_usage', [
        { project_id: project, user_id: u1, day: '2025-01-01', resource_id: cpu, token: 0, usage: '1' },
        { project_id: project, user_id: u1, day: '2025-01-01', resource_id: cpu, token: 1, usage: '2' },
        { project_id: project, user_id: u1, day: '2025-01-01', resource_id: cpu, token: 2, usage: '3' },
        { project_id: project, user_id: u1, day: '2025-01-02', resource_id: cpu, token: 2, usage: '9' },
        { project_id: project, user_id: u2, day: '2025-01-01', resource_id: cpu, token: 7, usage: '5' },
      ]);
      await insert(m, 'billing_job_usage', [{ job_id: randomUUID(), resource_id: cpu, run_id: r1, usage: '19.5' }]);
      const before = await totals(m);

      // Removed: run 3→1 and 2→1 (3 rows), group 2→1 (1), daily 3→1 (2).
      expect(await repo.compactShards(m, 1000)).toBe(6);

      const sorted = <T extends { run_id: string }>(rows: T[]) =>
        [...rows].sort((a, b) => (a.run_id < b.run_id ? -1 : 1));
      expect(await runRows(m, [r1, r2])).toEqual(
        sorted([
          ...[
            { run_id: r1, resource_id: cpu, token: 0, usage: '19.500000000000000001' },
            { run_id: r1, resource_id: memory, token: 3, usage: '4' },
          ].sort((a, b) => a.resource_id - b.resource_id),
          { run_id: r2, resource_id: cpu, token: 0, usage: '2.00' },
        ]),
      );
      expect(await groupRows(m, r1)).toEqual([
        { job_group_id: 0, resource_id: cpu, token: 0, usage: '3.5' },
        { job_group_id: 1, resource_id: cpu, token: 8, usage: '0.5' },
      ]);
      const dailyExpected = [
        { user_id: u1, day: '2025-01-01', resource_id: cpu, token: 0, usage: '6' },
        { user_id: u1, day: '2025-01-02', resource_id: cpu, token: 2, usage: '9' },
        { user_id: u2, day: '2025-01-01', resource_id: cpu, token: 7, usage: '5' },
      ].sort((a, b) => (a.user_id < b.user_id ? -1 : a.user_id > b.user_id ? 1 : a.day < b.day ? -1 : 1));
      expect(await dailyRows(m, project)).toEqual(dailyExpected);
      expect(await totals(m)).toEqual(before);

      // Nothing left to fold: a second pass changes nothing.
      expect(await repo.compactShards(m, 1000)).toBe(0);
      expect(await totals(m)).toEqual(before);
    });
  });

  it('folds at most `limit` spread sets per table per pass, in key order; the next pass takes the rest', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      await repo.compactShards(m, EVERYTHING);
      const runs: string[] = [randomUUID(), randomUUID(), randomUUID()].sort();
      await insert(
        m,
        'billing_run_usage',
        runs.flatMap((run_id, i) =>
          [0, 1, 2, 3].slice(0, i + 2).map((token) => ({ run_id, resource_id: cpu, token, usage: '1' })),
        ),
      ); // run 0 on 2 tokens, run 1 on 3, run 2 on 4
      const before = await totals(m);
      expect(await repo.compactShards(m, 2)).toBe(1 + 2);
      expect(
        (await runRows(m, runs)).map((r: { run_id: string; token: number }) => [runs.indexOf(r.run_id), r.token]),
      ).toEqual([
        [0, 0],
        [1, 0],
        [2, 0],
        [2, 1],
        [2, 2],
        [2, 3],
      ]);
      expect(await repo.compactShards(m, 2)).toBe(3);
      expect(await runRows(m, runs)).toEqual(
        runs.map((run_id, i) => ({ run_id, resource_id: cpu, token: 0, usage: String(i + 2) })),
      );
      expect(await totals(m)).toEqual(before);
    });
  });
});
