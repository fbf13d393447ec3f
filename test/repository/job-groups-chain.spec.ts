import { Client } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { COUNTER_TOKENS } from '../../src/modules/job-groups/counter-tokens';
import { JobGroupCounterReadsRepository } from '../../src/modules/job-groups/job-group-counter-reads.repository';
import { JobGroupCounterDeltasRepository } from '../../src/modules/job-groups/job-group-counter-deltas.repository';
import { JobGroupCountersRepository } from '../../src/modules/job-groups/job-group-counters.repository';
import { type ActiveCounts, type Counts, NO_COUNTS } from '../../src/modules/job-groups/job-group-rows';
import {
  inRolledBackTransaction,
  lockableNow,
  openDataSource,
  openTransaction,
  otherSession,
  seedRun,
  untilSomeoneWaitsForALock,
} from '../support/repository-tier';
import { describeRealPostgres } from '../support/test-app';

/**
 * The chain lock of the job-group tree: a group and its ancestors' counter rows, locked deepest first, on the
 * transaction's token (and whole where asked), and counted on that token's rows.
 */
describe('JobGroupCountersRepository: lockChain and lockChainAndCount on token rows', () => {
  let ds: DataSource;
  let repo: JobGroupCountersRepository;
  let deltas: JobGroupCounterDeltasRepository;
  let reads: JobGroupCounterReadsRepository;
  beforeAll(async () => {
    ds = await openDataSource();
    repo = new JobGroupCountersRepository();
    deltas = new JobGroupCounterDeltasRepository();
    reads = new JobGroupCounterReadsRepository(ds);
  });
  afterAll(() => ds.destroy());

  /** A run with the chain 0 ← 1 ← 2 ← 3 and a side group 4 under 0; fail-fast at 3 failures on group 2. */
  const TREE = { 1: 0, 2: 1, 3: 2, 4: 0 };
  /** The token the tests' transactions write on. */
  const T = 5;

  /** Counter rows as stored, by group and token (zero rows left out). */
  const rowsOf = async (m: EntityManager | DataSource, runId: string) =>
    Object.fromEntries(
      (
        await m.query(
          `SELECT job_group_id || '/' || token AS k, n_jobs, n_completed, n_succeeded, n_failed, n_cancelled,
                  n_aborted, n_provisioning, n_running, n_retrying, cancelled
             FROM job_group_counters WHERE run_id = $1 ORDER BY job_group_id, token`,
          [runId],
        )
      ).map(({ k, ...rest }: { k: string }) => [k, rest]),
    );

  /** Adds to the counters of one group's token row (seeding a state: jobs in every group, some finished). */
  const addTo = (m: EntityManager | DataSource, runId: string, g: number, token: number, c: Record<string, unknown>) =>
    m.query(
      `UPDATE job_group_counters SET ${Object.entries(c)
        .map(([k, v], i) => (typeof v === 'boolean' ? `${k} = $${i + 4}` : `${k} = ${k} + $${i + 4}`))
        .join(', ')} WHERE run_id = $1 AND job_group_id = $2 AND token = $3`,
      [runId, g, token, ...Object.values(c)],
    );

  /**
   * Seeds the tree with jobs, spread over tokens as concurrent transactions leave them: 2 in group 3, 3 in group 2,
   * 1 in group 1, 4 in group 4; one job of group 3 done (counted on token 9); on the root, the run's active counts
   * (a job started on token 9 and ended on token 2 leaves -1 there).
   */
  const seedCounted = async (m: EntityManager | DataSource) => {
    const run = await seedRun(m, TREE, { cancelAfterNFailures: { 2: 3 } });
    await addTo(m, run.runId, 3, 0, { n_jobs: 2 });
    await addTo(m, run.runId, 2, 0, { n_jobs: 5 });
    await addTo(m, run.runId, 1, 0, { n_jobs: 6 });
    await addTo(m, run.runId, 4, 0, { n_jobs: 4 });
    await addTo(m, run.runId, 0, 0, { n_jobs: 10, n_provisioning: 2 });
    for (const g of [3, 2, 1, 0]) await addTo(m, run.runId, g, 9, { n_completed: 1, n_succeeded: 1 });
    await addTo(m, run.runId, 0, 9, { n_running: 4, n_retrying: 1 });
    await addTo(m, run.runId, 0, 2, { n_running: -1 });
    return run.runId;
  };

  const sums = (c: Partial<Counts & ActiveCounts>) => ({ ...NO_COUNTS, ...c });
  const level = (
    jobGroupId: number,
    lvl: number,
    exact: ReturnType<typeof sums> | null,
    failFast: number | null = null,
  ) => ({
    jobGroupId,
    level: lvl,
    cancelAfterNFailures: failFast,
    cancelled: false,
    exact,
  });

  it('lockChain: the group and its ancestors, deepest first; whole sums only where locked whole', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      expect(await repo.lockChain(m, runId, 3, T)).toEqual([
        level(3, 0, null),
        level(2, 1, null, 3),
        level(1, 2, null),
        level(0, 3, null),
      ]);
      expect(await repo.lockChain(m, runId, 3, T, [3, 0])).toEqual([
        level(3, 0, sums({ nJobs: 2, nCompleted: 1, nSucceeded: 1 })),
        level(2, 1, null, 3),
        level(1, 2, null),
        level(0, 3, sums({ nJobs: 10, nCompleted: 1, nSucceeded: 1, nProvisioning: 2, nRunning: 3, nRetrying: 1 })),
      ]);
      // With fail-fast asked for, the levels that fail fast are whole.
      expect(await repo.lockChain(m, runId, 3, T, [], true)).toEqual([
        level(3, 0, null),
        level(2, 1, sums({ nJobs: 5, nCompleted: 1, nSucceeded: 1 }), 3),
        level(1, 2, null),
        level(0, 3, null),
      ]);
      expect((await repo.lockChain(m, runId, 4, T)).map((l) => l.jobGroupId)).toEqual([4, 0]);
      expect((await repo.lockChain(m, runId, 0, T)).map((l) => l.jobGroupId)).toEqual([0]);
      expect(await repo.lockChain(m, runId, 9, T)).toEqual([]);
      expect(await repo.lockChain(m, '00000000-0000-4000-8000-000000000000', 0, T)).toEqual([]);
    });
  });

  it('lockChainAndCount: the outcome on the token’s row of every level, active counts on the root’s', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      const before = await rowsOf(m, runId);
      const { levels, counted } = await repo.lockChainAndCount(
        m,
        runId,
        3,
        T,
        { nCompleted: 1, nFailed: 1 },
        { nRunning: -1, nRetrying: 1 },
        true,
      );
      expect(counted).toBe(true);
      const after = await rowsOf(m, runId);
      const changed = Object.keys(after).filter((k) => JSON.stringify(after[k]) !== JSON.stringify(before[k]));
      expect(changed).toEqual([`0/${T}`, `1/${T}`, `2/${T}`, `3/${T}`]);
      expect(after[`0/${T}`]).toMatchObject({ n_completed: 1, n_failed: 1, n_running: -1, n_retrying: 1 });
      for (const g of [1, 2, 3])
        expect(after[`${g}/${T}`]).toMatchObject({ n_completed: 1, n_failed: 1, n_running: 0 });
      // The level that fails fast was locked whole: its sums, as they stand afterwards.
      expect(levels).toEqual([
        level(3, 0, null),
        level(2, 1, sums({ nJobs: 5, nCompleted: 2, nSucceeded: 1, nFailed: 1 }), 3),
        level(1, 2, null),
        level(0, 3, null),
      ]);
    });
  });

  it('lockChainAndCount: every counter of the delta lands (jobs added, cancelled, aborted)', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      await repo.lockChainAndCount(m, runId, 4, T, { nJobs: 3, nCompleted: 2, nCancelled: 2, nAborted: 1 }, {}, false);
      const after = await rowsOf(m, runId);
      for (const g of [4, 0])
        expect(after[`${g}/${T}`]).toMatchObject({ n_jobs: 3, n_completed: 2, n_cancelled: 2, n_aborted: 1 });
      for (const g of [1, 2, 3]) expect(after[`${g}/${T}`]).toMatchObject({ n_jobs: 0, n_completed: 0 });
    });
  });

  it.each([
    ['an ancestor', 1],
    ['the group itself', 3],
    ['the root (a stopped run)', 0],
  ])(
    'lockChainAndCount under a cancelled level (%s): counts nothing, still moves the root’s active counts',
    async (_label, cancelledGroup) => {
      await inRolledBackTransaction(ds, async (m) => {
        const runId = await seedCounted(m);
        await deltas.markCancelled(m, runId, cancelledGroup);
        const before = await rowsOf(m, runId);
        const { levels, counted } = await repo.lockChainAndCount(
          m,
          runId,
          3,
          T,
          { nCompleted: 1, nSucceeded: 1 },
          { nRunning: -1 },
          false,
        );
        expect(counted).toBe(false);
        const after = await rowsOf(m, runId);
        expect(after).toEqual({ ...before, [`0/${T}`]: { ...before[`0/${T}`], n_running: -1 } });
        expect(levels.map((l) => [l.jobGroupId, l.cancelled])).toEqual(
          [3, 2, 1, 0].map((g) => [g, g === cancelledGroup]),
        );
      });
    },
  );

  it('lockChainAndCount on a group that does not exist: nothing, and nothing changes', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      const before = await rowsOf(m, runId);
      expect(await repo.lockChainAndCount(m, runId, 42, T, { nCompleted: 1 }, { nRunning: -1 }, false)).toEqual({
        levels: [],
        counted: false,
      });
      expect(await rowsOf(m, runId)).toEqual(before);
    });
  });

  it('summed reads add up every token row', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      expect(await reads.countsOf(runId, 0, m)).toEqual(
        sums({ nJobs: 10, nCompleted: 1, nSucceeded: 1, nProvisioning: 2, nRunning: 3, nRetrying: 1 }),
      );
      expect((await reads.rootCounts([runId], m)).get(runId)).toMatchObject(
        sums({ nJobs: 10, nCompleted: 1, nSucceeded: 1, nProvisioning: 2, nRunning: 3, nRetrying: 1 }),
      );
      expect((await reads.countersOfGroups(runId, [3, 4], m)).get(3)).toMatchObject({ nJobs: 2, nCompleted: 1 });
      expect(await reads.unfinishedJobs(m, [runId])).toBe(9);
    });
  });

  describeRealPostgres('locks (real PostgreSQL: another session)', () => {
    let other: Client;
    let observer: Client;
    let runId: string;
    beforeAll(async () => {
      other = await otherSession();
      observer = await otherSession();
      runId = await seedCounted(ds);
    });
    afterAll(async () => {
      await other.end();
      await observer.end();
    });

    const counterRow = 'SELECT 1 FROM job_group_counters WHERE run_id = $1 AND job_group_id = $2 AND token = $3';
    /** Whether another session could lock each (group, token) counter row right now (asked one after the other). */
    const lockable = async (rows: [number, number][]) => {
      const out: boolean[] = [];
      for (const [g, t] of rows) out.push(await lockableNow(other, counterRow, [runId, g, t]));
      return out;
    };

    it.each([
      ['lockChain', (m: EntityManager) => repo.lockChain(m, runId, 3, T)],
      ['lockChainAndCount', (m: EntityManager) => repo.lockChainAndCount(m, runId, 3, T, { nCompleted: 0 }, {}, false)],
    ])('%s holds the token’s row of every level of the chain, and no other row', async (_label, lock) => {
      const tx = await openTransaction(ds);
      try {
        await lock(tx.manager);
        expect(
          await lockable([
            [3, T],
            [2, T],
            [1, T],
            [0, T],
            [4, T],
            [3, T + 1],
            [0, 0],
          ]),
        ).toEqual([false, false, false, false, true, true, true]);
      } finally {
        await tx.rollbackTransaction();
        await tx.release();
      }
      expect(
        await lockable([
          [3, T],
          [2, T],
          [1, T],
          [0, T],
        ]),
      ).toEqual([true, true, true, true]);
    });

    it('a level locked whole holds every row of that level', async () => {
      const tx = await openTransaction(ds);
      try {
        await repo.lockChain(tx.manager, runId, 3, T, [2]);
        const all = Array.from({ length: COUNTER_TOKENS }, (_, t): [number, number] => [2, t]);
        expect((await lockable(all)).every((free) => !free)).toBe(true);
        expect(await lockable([[1, T + 1]])).toEqual([true]);
      } finally {
        await tx.rollbackTransaction();
        await tx.release();
      }
    });

    it('counts on different tokens do not wait for each other; on the same token they do', async () => {
      const first = await openTransaction(ds);
      const second = await openTransaction(ds);
      try {
        await repo.lockChainAndCount(first.manager, runId, 3, 1, { nCompleted: 0 }, { nRunning: 0 }, false);
        // Another token: done while the first transaction still holds its rows.
        await repo.lockChainAndCount(second.manager, runId, 3, 2, { nCompleted: 0 }, { nRunning: 0 }, false);
        await second.commitTransaction();
        await second.startTransaction();
        const waiting = repo.lockChainAndCount(second.manager, runId, 3, 1, { nCompleted: 0 }, {}, false);
        await untilSomeoneWaitsForALock(observer);
        await first.commitTransaction();
        await waiting;
      } finally {
        for (const tx of [first, second]) {
          if (tx.isTransactionActive) await tx.rollbackTransaction();
          await tx.release();
        }
      }
    });

    it('a counter that waited for a cancellation’s whole lock sees it committed: not counted', async () => {
      const canceller = await openTransaction(ds);
      const counter = await openTransaction(ds);
      try {
        await repo.lockChain(canceller.manager, runId, 1, 0, [1]);
        await deltas.markCancelled(canceller.manager, runId, 1);
        const before = await rowsOf(ds, runId);
        const waiting = repo.lockChainAndCount(
          counter.manager,
          runId,
          3,
          T,
          { nCompleted: 1, nSucceeded: 1 },
          {},
          false,
        );
        await untilSomeoneWaitsForALock(observer);
        await canceller.commitTransaction();
        const { levels, counted } = await waiting;
        await counter.commitTransaction();
        expect(counted).toBe(false);
        expect(levels.find((l) => l.jobGroupId === 1)?.cancelled).toBe(true);
        const after = await rowsOf(ds, runId);
        for (const [k, row] of Object.entries(after))
          expect([k, row]).toEqual([k, k.startsWith('1/') ? { ...before[k], cancelled: true } : before[k]]);
      } finally {
        for (const tx of [canceller, counter]) {
          if (tx.isTransactionActive) await tx.rollbackTransaction();
          await tx.release();
        }
      }
    });
  });
});
