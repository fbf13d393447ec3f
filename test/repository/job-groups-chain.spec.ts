import { Client } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { JobGroupCountersRepository } from '../../src/modules/job-groups/job-group-counters.repository';
import type { ChainLevel } from '../../src/modules/job-groups/job-group-rows';
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

/** The chain lock of the job-group tree: a group and its ancestors' counters, locked deepest first, and counted. */
describe('JobGroupCountersRepository: lockChain and lockChainAndCount', () => {
  let ds: DataSource;
  let repo: JobGroupCountersRepository;
  beforeAll(async () => {
    ds = await openDataSource();
    repo = new JobGroupCountersRepository(ds);
  });
  afterAll(() => ds.destroy());

  /** A run with the chain 0 ← 1 ← 2 ← 3 and a side group 4 under 0; fail-fast at 3 failures on group 2. */
  const TREE = { 1: 0, 2: 1, 3: 2, 4: 0 };

  /** Counter rows as stored, by group. */
  const countersOf = async (m: EntityManager | DataSource, runId: string) =>
    Object.fromEntries(
      (
        await m.query(
          `SELECT job_group_id AS g, n_jobs, n_completed, n_succeeded, n_failed, n_cancelled, n_aborted,
                  n_provisioning, n_running, n_retrying, cancelled
             FROM job_group_counters WHERE run_id = $1 ORDER BY job_group_id`,
          [runId],
        )
      ).map(({ g, ...rest }: { g: number }) => [g, rest]),
    );

  /** Sets counters of one group (seeding a state: a run with jobs in every group, some finished). */
  const setCounters = (m: EntityManager | DataSource, runId: string, g: number, c: Record<string, unknown>) =>
    m.query(
      `UPDATE job_group_counters SET ${Object.keys(c)
        .map((k, i) => `${k} = $${i + 3}`)
        .join(', ')} WHERE run_id = $1 AND job_group_id = $2`,
      [runId, g, ...Object.values(c)],
    );

  /**
   * Seeds the tree with jobs: 2 in group 3, 3 in group 2, 1 in group 1, 4 in group 4, none in the root itself; one
   * job of group 3 done; on the root, the run's active counts: 2 provisioning, 3 running, 1 retrying.
   */
  const seedCounted = async (m: EntityManager | DataSource) => {
    const run = await seedRun(m, TREE, { cancelAfterNFailures: { 2: 3 } });
    await setCounters(m, run.runId, 3, { n_jobs: 2, n_completed: 1, n_succeeded: 1 });
    await setCounters(m, run.runId, 2, { n_jobs: 5, n_completed: 1, n_succeeded: 1 });
    await setCounters(m, run.runId, 1, { n_jobs: 6, n_completed: 1, n_succeeded: 1 });
    await setCounters(m, run.runId, 4, { n_jobs: 4 });
    await setCounters(m, run.runId, 0, {
      n_jobs: 10,
      n_completed: 1,
      n_succeeded: 1,
      n_provisioning: 2,
      n_running: 3,
      n_retrying: 1,
    });
    return run.runId;
  };

  const level = (
    jobGroupId: number,
    lvl: number,
    c: Partial<ChainLevel> & { nJobs: number },
    cancelAfterNFailures: number | null = null,
  ): ChainLevel => ({
    jobGroupId,
    level: lvl,
    cancelAfterNFailures,
    cancelled: false,
    nCompleted: 0,
    nSucceeded: 0,
    nFailed: 0,
    nCancelled: 0,
    nAborted: 0,
    nAlwaysRunOpen: 0,
    nProvisioning: 0,
    nRunning: 0,
    nRetrying: 0,
    nPending: 0,
    ...c,
  });

  it('lockChain: the group and its ancestors, deepest first: counters, fail-fast, cancelled flag', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      expect(await repo.lockChain(m, runId, 3)).toEqual([
        level(3, 0, { nJobs: 2, nCompleted: 1, nSucceeded: 1 }),
        level(2, 1, { nJobs: 5, nCompleted: 1, nSucceeded: 1 }, 3),
        level(1, 2, { nJobs: 6, nCompleted: 1, nSucceeded: 1 }),
        level(0, 3, { nJobs: 10, nCompleted: 1, nSucceeded: 1, nProvisioning: 2, nRunning: 3, nRetrying: 1 }),
      ]);
      expect(await repo.lockChain(m, runId, 4)).toEqual([
        level(4, 0, { nJobs: 4 }),
        level(0, 1, { nJobs: 10, nCompleted: 1, nSucceeded: 1, nProvisioning: 2, nRunning: 3, nRetrying: 1 }),
      ]);
      expect((await repo.lockChain(m, runId, 0)).map((l) => l.jobGroupId)).toEqual([0]);
      expect(await repo.lockChain(m, runId, 9)).toEqual([]);
      expect(await repo.lockChain(m, '00000000-0000-4000-8000-000000000000', 0)).toEqual([]);
    });
  });

  it('lockChainAndCount: the outcome into every level of the chain, active counts on the root only', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      const before = await countersOf(m, runId);
      const { levels, counted } = await repo.lockChainAndCount(
        m,
        runId,
        3,
        { nCompleted: 1, nFailed: 1 },
        { nRunning: -1, nRetrying: 1 },
      );
      expect(counted).toBe(true);
      const after = await countersOf(m, runId);
      const plus = (g: number, d: Record<string, number>) =>
        Object.fromEntries(Object.entries(before[g]).map(([k, v]) => [k, k in d ? (v as number) + d[k] : v]));
      expect(after).toEqual({
        0: plus(0, { n_completed: 1, n_failed: 1, n_running: -1, n_retrying: 1 }),
        1: plus(1, { n_completed: 1, n_failed: 1 }),
        2: plus(2, { n_completed: 1, n_failed: 1 }),
        3: plus(3, { n_completed: 1, n_failed: 1 }),
        4: before[4], // not in the chain
      });
      // The levels as they stand afterwards, deepest first.
      expect(levels).toEqual([
        level(3, 0, { nJobs: 2, nCompleted: 2, nSucceeded: 1, nFailed: 1 }),
        level(2, 1, { nJobs: 5, nCompleted: 2, nSucceeded: 1, nFailed: 1 }, 3),
        level(1, 2, { nJobs: 6, nCompleted: 2, nSucceeded: 1, nFailed: 1 }),
        level(0, 3, {
          nJobs: 10,
          nCompleted: 2,
          nSucceeded: 1,
          nFailed: 1,
          nProvisioning: 2,
          nRunning: 2,
          nRetrying: 2,
        }),
      ]);
    });
  });

  it('lockChainAndCount: every counter of the delta lands (jobs added, cancelled, aborted)', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      const before = await countersOf(m, runId);
      await repo.lockChainAndCount(m, runId, 4, { nJobs: 3, nCompleted: 2, nCancelled: 2, nAborted: 1 }, {});
      const after = await countersOf(m, runId);
      const d = { n_jobs: 3, n_completed: 2, n_cancelled: 2, n_aborted: 1 };
      for (const g of [4, 0])
        for (const [k, v] of Object.entries(before[g]))
          expect([g, k, after[g][k]]).toEqual([g, k, k in d ? (v as number) + d[k as keyof typeof d] : v]);
      for (const g of [1, 2, 3]) expect(after[g]).toEqual(before[g]);
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
        await setCounters(m, runId, cancelledGroup, { cancelled: true });
        const before = await countersOf(m, runId);
        const { levels, counted } = await repo.lockChainAndCount(
          m,
          runId,
          3,
          { nCompleted: 1, nSucceeded: 1 },
          { nRunning: -1 },
        );
        expect(counted).toBe(false);
        const after = await countersOf(m, runId);
        expect(after).toEqual({ ...before, 0: { ...before[0], n_running: before[0].n_running - 1 } });
        expect(levels.map((l) => [l.jobGroupId, l.cancelled, l.nCompleted, l.nRunning])).toEqual(
          [3, 2, 1, 0].map((g) => [g, g === cancelledGroup, before[g].n_completed, after[g].n_running]),
        );
      });
    },
  );

  it('lockChainAndCount on a group that does not exist: nothing, and nothing changes', async () => {
    await inRolledBackTransaction(ds, async (m) => {
      const runId = await seedCounted(m);
      const before = await countersOf(m, runId);
      expect(await repo.lockChainAndCount(m, runId, 42, { nCompleted: 1 }, { nRunning: -1 })).toEqual({
        levels: [],
        counted: false,
      });
      expect(await countersOf(m, runId)).toEqual(before);
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

    const counterRow = 'SELECT 1 FROM job_group_counters WHERE run_id = $1 AND job_group_id = $2';
    /** Whether another session could lock each group's counters row right now (asked one after the other). */
    const lockable = async (groups: number[]) => {
      const out: boolean[] = [];
      for (const g of groups) out.push(await lockableNow(other, counterRow, [runId, g]));
      return out;
    };

    it.each([
      ['lockChain', (m: EntityManager) => repo.lockChain(m, runId, 3)],
      ['lockChainAndCount', (m: EntityManager) => repo.lockChainAndCount(m, runId, 3, { nCompleted: 0 }, {})],
    ])('%s holds every counters row of the chain, and no other, until the transaction ends', async (_label, lock) => {
      const tx = await openTransaction(ds);
      try {
        await lock(tx.manager);
        expect(await lockable([3, 2, 1, 0, 4])).toEqual([false, false, false, false, true]);
      } finally {
        await tx.rollbackTransaction();
        await tx.release();
      }
      expect(await lockable([3, 2, 1, 0])).toEqual([true, true, true, true]);
    });

    it('a counter that waited for the chain sees a cancellation committed meanwhile: not counted', async () => {
      const canceller = await openTransaction(ds);
      const counter = await openTransaction(ds);
      try {
        await repo.lockChain(canceller.manager, runId, 2);
        await repo.markCancelled(canceller.manager, runId, 1);
        const before = await countersOf(ds, runId);
        const waiting = repo.lockChainAndCount(counter.manager, runId, 3, { nCompleted: 1, nSucceeded: 1 }, {});
        await untilSomeoneWaitsForALock(observer);
        await canceller.commitTransaction();
        const { levels, counted } = await waiting;
        await counter.commitTransaction();
        expect(counted).toBe(false);
        expect(levels.find((l) => l.jobGroupId === 1)?.cancelled).toBe(true);
        expect(await countersOf(ds, runId)).toEqual({ ...before, 1: { ...before[1], cancelled: true } });
      } finally {
        for (const tx of [canceller, counter]) {
          if (tx.isTransactionActive) await tx.rollbackTransaction();
          await tx.release();
        }
      }
    });
  });
});
