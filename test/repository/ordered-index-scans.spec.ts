import { DataSource, EntityManager } from 'typeorm';
import { withOrderedIndexScans } from '../../src/modules/jobs/ordered-index-scans';
import { inRolledBackTransaction, openDataSource } from '../support/repository-tier';

/** The planner guard of the LATERAL-per-key reads (first jobs of runs, newest submissions of jobs). */
describe('withOrderedIndexScans', () => {
  let ds: DataSource;
  beforeAll(async () => {
    ds = await openDataSource();
  });
  afterAll(() => ds.destroy());

  const settings = async (m: EntityManager) =>
    (
      await m.query(
        `SELECT current_setting('enable_bitmapscan') AS bitmap, current_setting('enable_sort') AS sort,
                current_setting('enable_seqscan') AS seq`,
      )
    )[0] as Record<string, string>;
  const ON = { bitmap: 'on', sort: 'on', seq: 'on' };
  const OFF = { bitmap: 'off', sort: 'off', seq: 'off' };

  it('outside a transaction: the read runs in one of its own with the three plans off; nothing stays off', async () => {
    const inside = await withOrderedIndexScans(ds.manager, async (m) => ({
      settings: await settings(m),
      inTransaction: m.queryRunner?.isTransactionActive,
    }));
    expect(inside).toEqual({ settings: OFF, inTransaction: true });
    expect(await settings(ds.manager)).toEqual(ON);
  });

  it("inside the caller's transaction: off for the read, then put back as they were", async () => {
    await inRolledBackTransaction(ds, async (m) => {
      await m.query(`SELECT set_config('enable_sort', 'off', true)`);
      expect(await withOrderedIndexScans(m, settings)).toEqual(OFF);
      expect(await settings(m)).toEqual({ ...ON, sort: 'off' });
    });
  });

  it('leaves an ordered index scan as the plan of a LATERAL ORDER BY ... LIMIT: no bitmap scan, no sort', async () => {
    const plan = await withOrderedIndexScans(ds.manager, async (m) =>
      (
        await m.query(
          `EXPLAIN SELECT s.id FROM jobs j
            CROSS JOIN LATERAL (SELECT x.id FROM job_submissions x WHERE x.job_id = j.id
                                 ORDER BY x.submission_num DESC LIMIT 3) s
            WHERE j.id = ANY($1::uuid[])`,
          [['00000000-0000-4000-8000-000000000000']],
        )
      )
        .map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN'])
        .join('\n'),
    );
    expect(plan).toMatch(/Index Scan Backward using uq_job_submissions_job_id_submission_num/);
    expect(plan).not.toMatch(/Bitmap|Sort/);
  });
});
