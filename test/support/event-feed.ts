import { RunStatusService } from '../../src/modules/runs/run-status.service';
import type { TestApp } from './test-app';

/**
 * Waits until the feed can show everything done before now: first the run and group statuses this app still has to
 * settle (the feed's own wait for them would record their events after the horizon below was read), then every
 * transaction that committed before now (the feed reads below its snapshot's xmin, which other databases'
 * transactions on this server hold back too).
 */
export async function feedReadable(t: TestApp): Promise<void> {
  await t.app.get(RunStatusService).settled();
  const [{ x }] = await t.dataSource.query<{ x: string }[]>(`SELECT pg_current_xact_id()::text AS x`);
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const [{ h }] = await t.dataSource.query<{ h: string }[]>(
      `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS h`,
    );
    if (BigInt(h) > BigInt(x)) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('a transaction on this PostgreSQL server has held the feed back for 30 s');
}
