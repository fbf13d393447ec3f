import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { BillingRepository, NewAttempt } from '../../src/modules/billing/billing.repository';
import { returning } from '../../src/infra/database/returning';
import {
  inRolledBackTransaction,
  openDataSource,
  openTransaction,
  otherSession,
  untilSomeoneWaitsForALock,
} from '../support/repository-tier';
import { describeRealPostgres } from '../support/test-app';

/**
 * Billing accrual: an open attempt rolled up to now (or closed where it stands), what accrued added to every
 * aggregate (job; each group of the chain; run; project × user × UTC day) on one shard token. Most cases run in a
 * transaction rolled back at the end: now() stands still inside it, so every expected amount is exact.
 */
describe('BillingRepository: insertAttempts, accrue and close', () => {
  let ds: DataSource;
  let repo: BillingRepository;
  /** Current resource ids by name (the versions insertAttempts pins). */
  let resourceId: Record<string, number>;
  beforeAll(async () => {
    ds = await openDataSource();
    repo = new BillingRepository(ds);
    const rows: { id: number; name: string }[] = await ds.query(
      `SELECT DISTINCT ON (name) id, name FROM resources ORDER BY name, version DESC`,
    );
    resourceId = Object.fromEntries(rows.map((r) => [r.name, r.id]));
  });
  afterAll(() => ds.destroy());

  /** 2 cores, 1 GiB, no GPU, in groups 2 → 1 → 0; nothing else in the database refers to these ids. */
  const attempt = (overrides: Partial<NewAttempt> = {}): NewAttempt => ({
    submissionId: randomUUID(),
    runId: randomUUID(),
    jobId: randomUUID(),
    projectId: randomUUID(),
    userId: randomUUID(),
    jobGroupIds: [2, 1, 0],
    requested: { cpu: 2, memory_mib: 1024, gpu: 0 },
    ...overrides,
  });
  const CPU = 2;
  /** Quantities whose products with any seconds value are exact in floating point too (× 2, × 1). */
  const MEM = 1;

  /** As if the attempt had started `seconds` ago (not before today's UTC midnight); returns the seconds it got. */
  const startedAgo = async (m: EntityManager, id: string, seconds: number): Promise<number> => {
    const [row] = await returning<{ s: string }>(
      m,
      `UPDATE billing_attempts
          SET started_at = GREATEST(now() - make_interval(secs => $2),
                                    date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'),
              rolled_up_to = GREATEST(now() - make_interval(secs => $2),
                                      date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
        WHERE submission_id = $1
       RETURNING EXTRACT(EPOCH FROM now() - rolled_up_to)::text AS s`,
      [id, seconds],
    );
    return Number(row.s);
  };

  const attemptRow = async (m: EntityManager | DataSource, id: string) =>
    (
      await m.query(
        `SELECT started_at = now() AS started_now, rolled_up_to = now() AS rolled_now,
                EXTRACT(EPOCH FROM now() - rolled_up_to)::float8 AS rolled_ago, closed_at IS NULL AS open,
                closed_at = rolled_up_to AS closed_at_rollup
           FROM billing_attempts WHERE submission_id = $1`,
        [id],
      )
    )[0];

  /** Every aggregate row the attempt's ids can have, usage as numbers (exact for these amounts). */
  const aggregates = async (m: EntityManager | DataSource, a: NewAttempt) => {
    const q = (sql: string, id: string) =>
      m.query(sql, [id]).then((rows: { usage: string }[]) => rows.map((r) => ({ ...r, usage: Number(r.usage) })));
    return {
      job: await q(
        `SELECT r.name AS resource, x.run_id, x.usage::text
           FROM billing_job_usage x JOIN resources r ON r.id = x.resource_id
          WHERE x.job_id = $1 ORDER BY r.name`,
        a.jobId,
      ),
      groups: await q(
        `SELECT x.job_group_id AS g, r.name AS resource, x.token, x.usage::text
           FROM billing_group_usage x JOIN resources r ON r.id = x.resource_id
          WHERE x.run_id = $1 ORDER BY x.job_group_id, r.name, x.token`,
        a.runId,
      ),
      run: await q(
        `SELECT r.name AS resource, x.token, x.usage::text
           FROM billing_run_usage x JOIN resources r ON r.id = x.resource_id
          WHERE x.run_id = $1 ORDER BY r.name, x.token`,
        a.runId,
      ),
      daily: await q(
        `SELECT to_char(x.day, 'YYYY-MM-DD') AS day, x.user_id, r.name AS resource, x.token, x.usage::text
           FROM billing_daily_usage x JOIN resources r ON r.id = x.resource_id
          WHERE x.project_id = $1 ORDER BY x.day, r.name, x.token`,
        a.projectId,
      ),
    };
  };

  const today = async (m: EntityManager) =>
    (await m.query(`SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS d`))[0].d as string;

  /** The aggregates of one accrual of `s` seconds on `token`, all on `day`. */
  const accrued = (a: NewAttempt, s: number, token: number, day: string) => ({
    job: [
      { resource: 'cpu', run_id: a.runId, usage: CPU * s },
      { resource: 'memory', run_id: a.runId, usage: MEM * s },
    ],
    groups: [0, 1, 2].flatMap((g) => [
      { g, resource: 'cpu', token, usage: CPU * s },
      { g, resource: 'memory', token, usage: MEM * s },
    ]),
    run: [
      { resource: 'cpu', token, usage: CPU * s },
      { resource: 'memory', token, usage: MEM * s },
    ],
    daily: [
      { day, user_id: a.userId, resource: 'cpu', token, usage: CPU * s },
      { day, user_id: a.userId, resource: 'memory', token, usage: MEM * s },
    ],
  });
  const nothing = { job: [], groups: [], run: [], daily: [] };

  it('insertAttempts pins each resource’s quantity at its current version and starts the clock now, once', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      const gpu = attempt({ requested: { gpu: 1, cpu: 0.5, memory_mib: 100 } });
      expect(await repo.insertAttempts(m, [gpu])).toHaveLength(1);
      expect(await repo.insertAttempts(m, [a])).toHaveLength(1);
      const pinned = (id: string) =>
        m.query(
          `SELECT resource_id, quantity::text FROM submission_resources WHERE submission_id = $1 ORDER BY resource_id`,
          [id],
        );
      const byId = (rows: { resource_id: number; quantity: string }[]) =>
        Object.fromEntries(rows.map((r) => [r.resource_id, Number(r.quantity)]));
      // Cores; GiB (MiB / 1024, exact to 10 decimals); GPUs, only when asked for.
      expect(byId(await pinned(a.submissionId))).toEqual({ [resourceId.cpu]: 2, [resourceId.memory]: 1 });
      expect(byId(await pinned(gpu.submissionId))).toEqual({
        [resourceId.cpu]: 0.5,
        [resourceId.memory]: 0.09765625,
        [resourceId.gpu]: 1,
      });
      expect(await attemptRow(m, a.submissionId)).toMatchObject({ started_now: true, rolled_now: true, open: true });
      // A repeated `running` changes nothing.
      expect(await repo.insertAttempts(m, [{ ...a, requested: { cpu: 64, memory_mib: 1024 } }])).toEqual([]);
      expect(byId(await pinned(a.submissionId))).toEqual({ [resourceId.cpu]: 2, [resourceId.memory]: 1 });
      expect(await aggregates(m, a)).toEqual(nothing);
    });
  });

  it('accrue: quantity × seconds since the last rollup into every aggregate, on the token given', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      const s = await startedAgo(m, a.submissionId, 90);
      expect(s).toBeGreaterThan(0);
      expect(await repo.accrue(m, [a.submissionId], true, false, 7)).toBe(true);
      expect(await aggregates(m, a)).toEqual(accrued(a, s, 7, await today(m)));
      expect(await attemptRow(m, a.submissionId)).toMatchObject({ rolled_now: true, open: true });
    });
  });

  it('accrues nothing twice: a repeat at the same time, or a rollup already ahead of now, adds nothing', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      const s = await startedAgo(m, a.submissionId, 60);
      await repo.accrue(m, [a.submissionId], true, false, 1);
      const once = await aggregates(m, a);
      expect(once).toEqual(accrued(a, s, 1, await today(m)));
      expect(await repo.accrue(m, [a.submissionId], true, false, 2)).toBe(false);
      expect(await aggregates(m, a)).toEqual(once);
      // A rollup an hour ahead of the clock (a report older than what was rolled up): kept, nothing accrues.
      await m.query(`UPDATE billing_attempts SET rolled_up_to = now() + interval '1 hour' WHERE submission_id = $1`, [
        a.submissionId,
      ]);
      expect(await repo.accrue(m, [a.submissionId], true, false, 3)).toBe(false);
      expect(await aggregates(m, a)).toEqual(once);
      expect((await attemptRow(m, a.submissionId)).rolled_ago).toBe(-3600);
    });
  });

  it('the same attempt on two tokens: sharded aggregates get a row per token, the job one row summed', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      const s1 = await startedAgo(m, a.submissionId, 60);
      await repo.accrue(m, [a.submissionId], true, false, 3);
      // Rolled back by 30 s (what a later heartbeat would find): the next accrual adds those 30 s on token 9.
      const [{ s: s2 }] = await returning<{ s: number }>(
        m,
        `UPDATE billing_attempts SET rolled_up_to = GREATEST(started_at, now() - interval '30 seconds')
          WHERE submission_id = $1 RETURNING EXTRACT(EPOCH FROM now() - rolled_up_to)::float8 AS s`,
        [a.submissionId],
      );
      await repo.accrue(m, [a.submissionId], true, false, 9);
      const day = await today(m);
      const first = accrued(a, s1, 3, day);
      const second = accrued(a, s2, 9, day);
      const interleave = <T>(x: T[], y: T[]) => x.flatMap((v, i) => [v, y[i]]);
      expect(await aggregates(m, a)).toEqual({
        job: first.job.map((j) => ({ ...j, usage: j.usage + (j.resource === 'cpu' ? CPU : MEM) * s2 })),
        groups: interleave(first.groups, second.groups),
        run: interleave(first.run, second.run),
        daily: interleave(first.daily, second.daily),
      });
    });
  });

  it('close: accrues up to now and closes the attempt there; a closed attempt never accrues again', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      const s = await startedAgo(m, a.submissionId, 45);
      expect(await repo.accrue(m, [a.submissionId], true, true, 4)).toBe(true);
      const closed = await aggregates(m, a);
      expect(closed).toEqual(accrued(a, s, 4, await today(m)));
      expect(await attemptRow(m, a.submissionId)).toMatchObject({
        rolled_now: true,
        open: false,
        closed_at_rollup: true,
      });
      // Even with its rollup pushed back (a late report), a closed attempt accrues nothing, open or closing.
      await m.query(`UPDATE billing_attempts SET rolled_up_to = started_at WHERE submission_id = $1`, [a.submissionId]);
      expect(await repo.accrue(m, [a.submissionId], true, false, 5)).toBe(false);
      expect(await repo.accrue(m, [a.submissionId], true, true, 5)).toBe(false);
      expect(await aggregates(m, a)).toEqual(closed);
    });
  });

  it('close at the last rollup (a lapsed lease): closed where the clock stood, nothing accrued', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      await startedAgo(m, a.submissionId, 300);
      expect(await repo.accrue(m, [a.submissionId], false, true, 6)).toBe(false);
      expect(await aggregates(m, a)).toEqual(nothing);
      expect(await attemptRow(m, a.submissionId)).toMatchObject({ open: false, closed_at_rollup: true });
      expect((await attemptRow(m, a.submissionId)).rolled_ago).toBeGreaterThan(0);
    });
  });

  it('an accrual across UTC midnight splits the day rows at midnight; the other aggregates get the total', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const a = attempt();
      await repo.insertAttempts(m, [a]);
      // Started at 23:00 UTC yesterday.
      const [span] = await returning<{ yesterday: string; total_s: string; today_s: string }>(
        m,
        `UPDATE billing_attempts
            SET started_at = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 hour',
                rolled_up_to = date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 hour'
          WHERE submission_id = $1
         RETURNING to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS yesterday,
                   EXTRACT(EPOCH FROM now() - started_at)::text AS total_s,
                   EXTRACT(EPOCH FROM now() - (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'))::text
                     AS today_s`,
        [a.submissionId],
      );
      expect(await repo.accrue(m, [a.submissionId], true, false, 2)).toBe(true);
      const todaySeconds = Number(span.today_s);
      const total = accrued(a, Number(span.total_s), 2, 'unused');
      const day = await today(m);
      const got = await aggregates(m, a);
      expect({ job: got.job, groups: got.groups, run: got.run }).toEqual({
        job: total.job,
        groups: total.groups,
        run: total.run,
      });
      expect(got.daily).toEqual([
        ...accrued(a, 3600, 2, span.yesterday).daily,
        ...(todaySeconds > 0 ? accrued(a, todaySeconds, 2, day).daily : []),
      ]);
    });
  });

  it('an unknown submission accrues nothing', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      expect(await repo.accrue(m, [randomUUID()], true, true, 0)).toBe(false);
    });
  });

  describeRealPostgres('what an accrual reads (real PostgreSQL)', () => {
    const all = Array.from({ length: 6000 }, () => attempt());
    const ids = all.map((a) => a.submissionId);
    const setClosed = (m: EntityManager, of: string[], closed: boolean) =>
      m.query(
        `UPDATE billing_attempts SET closed_at = CASE WHEN $2 THEN rolled_up_to END
          WHERE submission_id = ANY($1::uuid[])`,
        [of, closed],
      );
    // Statistics (and the index) as a quiet spell leaves them: every attempt ever made closed, vacuumed, analyzed.
    beforeAll(async () => {
      await ds.transaction(async (m) => {
        await repo.insertAttempts(m, all);
        await setClosed(m, ids, true);
      });
      await ds.query('VACUUM ANALYZE billing_attempts');
    });
    afterAll(async () => {
      await ds.query('DELETE FROM submission_resources WHERE submission_id = ANY($1::uuid[])', [ids]);
      await ds.query('DELETE FROM billing_attempts WHERE submission_id = ANY($1::uuid[])', [ids]);
    });

    it('closing attempts reads their own rows by key, however many attempts are open', async () => {
      await inRolledBackTransaction(ds, async (m) => {
        // Then a fleet starts 2,000 before the next ANALYZE: on those statistics the open attempts' index looks
        // like the way to find the two a transaction closes.
        const open = ids.slice(0, 2000);
        await setClosed(m, open, false);
        const closing = open.slice(0, 2);
        for (const id of closing) await startedAgo(m, id, 60);
        const read = async () =>
          (
            await m.query(
              `SELECT pg_stat_get_xact_tuples_returned('idx_billing_attempts_project_id_open'::regclass)::int AS open,
                      pg_stat_get_xact_tuples_returned('pk_billing_attempts'::regclass)::int AS key`,
            )
          )[0] as { open: number; key: number };
        const before = await read();
        expect(await repo.accrue(m, closing, true, true, 0)).toBe(true);
        const after = await read();
        expect(after.open - before.open).toBe(0); // not the 2,000 open attempts' entries to keep two
        expect(after.key - before.key).toBeLessThanOrEqual(8 * closing.length); // a few lookups each (5 here)
      });
    });
  });

  describeRealPostgres('concurrent accruals (real PostgreSQL)', () => {
    let observer: Client;
    beforeAll(async () => {
      observer = await otherSession();
    });
    afterAll(() => observer.end());

    it('two transactions accruing one attempt bill each second once: the second waits, adds the tail', async () => {
      const a = attempt();
      await ds.transaction(async (m) => {
        await repo.insertAttempts(m, [a]);
        await m.query(
          `UPDATE billing_attempts
              SET started_at = now() - interval '120 seconds', rolled_up_to = now() - interval '120 seconds'
            WHERE submission_id = $1`,
          [a.submissionId],
        );
      });
      const first = await openTransaction(ds);
      const second = await openTransaction(ds);
      try {
        expect(await repo.accrue(first.manager, [a.submissionId], true, false, 1)).toBe(true);
        const waiting = repo.accrue(second.manager, [a.submissionId], true, false, 2);
        await untilSomeoneWaitsForALock(observer);
        await first.commitTransaction();
        await waiting;
        await second.commitTransaction();
        // Every aggregate holds exactly quantity × (last rollup − start): the second added only what came after
        // the first's rollup, never the first's 120 s again.
        const [check] = await ds.query(
          `WITH expected AS (
             SELECT sr.resource_id, sr.quantity * EXTRACT(EPOCH FROM a.rolled_up_to - a.started_at) AS usage
               FROM billing_attempts a JOIN submission_resources sr USING (submission_id) WHERE a.submission_id = $1
           )
           SELECT bool_and(e.usage = (SELECT SUM(usage) FROM billing_job_usage x
                                       WHERE x.job_id = $2 AND x.resource_id = e.resource_id)) AS job,
                  bool_and(e.usage = (SELECT SUM(usage) FROM billing_run_usage x
                                       WHERE x.run_id = $3 AND x.resource_id = e.resource_id)) AS run,
                  -- three groups in the chain, each billed the whole usage
                  bool_and(e.usage * 3 = (SELECT SUM(usage) FROM billing_group_usage x
                                           WHERE x.run_id = $3 AND x.resource_id = e.resource_id)) AS groups,
                  min(e.usage) > 0 AS accrued
             FROM expected e`,
          [a.submissionId, a.jobId, a.runId],
        );
        expect(check).toEqual({ job: true, run: true, groups: true, accrued: true });
        const [{ cpu }] = await ds.query(
          `SELECT SUM(usage)::float8 AS cpu FROM billing_job_usage WHERE job_id = $1 AND resource_id = $2`,
          [a.jobId, resourceId.cpu],
        );
        expect(cpu).toBeGreaterThanOrEqual(CPU * 120);
        expect(cpu).toBeLessThan(CPU * 180);
      } finally {
        for (const tx of [first, second]) {
          if (tx.isTransactionActive) await tx.rollbackTransaction();
          await tx.release();
        }
        for (const table of ['billing_group_usage', 'billing_run_usage'])
          await ds.query(`DELETE FROM ${table} WHERE run_id = $1`, [a.runId]);
        await ds.query(`DELETE FROM billing_job_usage WHERE job_id = $1`, [a.jobId]);
        await ds.query(`DELETE FROM billing_daily_usage WHERE project_id = $1`, [a.projectId]);
        await ds.query(`DELETE FROM billing_attempts WHERE submission_id = $1`, [a.submissionId]);
      }
    });
  });
});
