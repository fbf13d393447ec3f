import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { notFound } from '../../common/errors/domain-error';
import {
  addDeltas,
  type Cancellation,
  cancelledJobOutcome,
  type JobOutcome,
  outcomeDelta,
} from '../lifecycle/outcomes';
import { counterToken } from './counter-tokens';
import { JobGroupCounterDeltasRepository } from './job-group-counter-deltas.repository';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import type { ActiveDelta, ChainLevel, CountsDelta } from './job-group-rows';
import { JobGroupsRepository } from './job-groups.repository';
import { type Chain, JobGroupsService } from './job-groups.service';

/**
 * Counting jobs' outcomes into their groups' counters, on the transaction's token rows (counter-tokens.ts): final
 * outcomes (with fail-fast), the outcomes a parent's failure forces on its descendants, and the run's active
 * counts. Methods run in the caller's transaction, after billing (LOCK_ORDER).
 */
@Injectable()
export class GroupCountingService {
  constructor(
    private readonly groups: JobGroupsService,
    private readonly tree: JobGroupsRepository,
    private readonly counters: JobGroupCountersRepository,
    private readonly deltas: JobGroupCounterDeltasRepository,
  ) {}

  /**
   * Final outcomes of several jobs of one run, counted together (one transaction): each job's outcome goes into
   * every level of its chain on the transaction's token rows, unless a level of its chain is cancelled (that
   * cancellation counted it already); the run's active counts move by `active` either way. With failures, the levels
   * that fail fast are locked whole and cancelled where their failures reach the threshold, once (failures in the
   * same call count together, then the threshold is checked). Returns which of `jobs` were not counted (by index),
   * and the fail-fast cancellations made. A lone chain is locked and counted in one statement.
   *
   * `lastInTransaction`: the caller has nothing more to do in its transaction, so COMMIT goes right behind the
   * counting statement (commit-ahead.ts), which then refuses rather than leave jobs uncounted or count failures on a
   * chain with fail-fast, whose threshold is checked after it (COMMIT_AHEAD_REFUSED: TransactionRunner runs the
   * transaction again, in which the caller, having seen the error, does not ask again).
   */
  async countOutcomes(
    m: EntityManager,
    runId: string,
    jobs: readonly { jobGroupId: number; outcome: JobOutcome; alwaysRun: boolean }[],
    active: ActiveDelta,
    lastInTransaction = false,
  ): Promise<{ uncounted: number[]; cancellations: Cancellation[] }> {
    const groupIds = [...new Set(jobs.map((j) => j.jobGroupId))];
    const failed = jobs.some((j) => j.outcome === 'failed');
    if (groupIds.length === 1) return this.countOneChain(m, runId, groupIds[0], jobs, active, lastInTransaction);
    const perGroup = new Map<number, CountsDelta>();
    for (const j of jobs) {
      const d = { ...outcomeDelta(j.outcome), nAlwaysRunOpen: j.alwaysRun ? -1 : 0 };
      perGroup.set(j.jobGroupId, addDeltas(perGroup.get(j.jobGroupId) ?? {}, d));
    }
    const counted = await this.counters.countChains(
      m,
      runId,
      counterToken(m),
      perGroup,
      active,
      failed,
      lastInTransaction,
    );
    const { rows } = counted;
    if (rows.every((r) => r.jobGroupId !== 0)) throw notFound(`job groups ${groupIds.join(', ')}`);
    const notCounted = new Set(counted.uncounted);
    const uncounted = await this.countSparedAll(
      m,
      runId,
      jobs,
      jobs.flatMap((j, i) => (notCounted.has(j.jobGroupId) ? [i] : [])),
    );
    if (!failed) return { uncounted, cancellations: [] };
    // What this call counted into each level (what fail-fast adds to the sums it read), once per level.
    const perLevel = new Map<number, CountsDelta>();
    for (const r of rows) {
      if (perLevel.has(r.jobGroupId)) continue;
      let d: CountsDelta = {};
      for (const g of r.below) if (!notCounted.has(g)) d = addDeltas(d, perGroup.get(g) ?? {});
      perLevel.set(r.jobGroupId, d);
    }
    // Fail-fast on the levels locked whole (their sums, with what this call added), deepest first.
    const cancellations: Cancellation[] = [];
    const depthOf = new Map(rows.map((r) => [r.jobGroupId, r.level]));
    const whole = [...new Set(rows.filter((r) => r.cancelAfterNFailures !== null).map((r) => r.jobGroupId))];
    whole.sort((a, b) => (depthOf.get(b) ?? 0) - (depthOf.get(a) ?? 0));
    for (const g of whole) {
      const mine = rows.filter((r) => r.jobGroupId === g);
      const n = mine[0].cancelAfterNFailures ?? 0;
      const failures = mine.reduce((sum, r) => sum + r.nFailed, 0) + (perLevel.get(g)?.nFailed ?? 0);
      if (failures < n || mine.some((r) => r.cancelled)) continue;
      // Every row of this level and its ancestors' token rows are held already: no wait, no new lock order.
      const chain = await this.groups.lockChain(m, runId, g, [g]);
      if (chain.cancellation) continue;
      cancellations.push((await this.groups.cancelLocked(m, runId, chain.levels, 'system', 'fail_fast')).cancellation);
    }
    return { uncounted, cancellations };
  }

  /** countOutcomes for jobs of one group: its chain locked and their outcomes counted in one statement. */
  private async countOneChain(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    jobs: readonly { outcome: JobOutcome; alwaysRun: boolean }[],
    active: ActiveDelta,
    commitAfter: boolean,
  ): Promise<{ uncounted: number[]; cancellations: Cancellation[] }> {
    let delta: CountsDelta = {};
    for (const j of jobs)
      delta = addDeltas(delta, { ...outcomeDelta(j.outcome), nAlwaysRunOpen: j.alwaysRun ? -1 : 0 });
    const failed = jobs.some((j) => j.outcome === 'failed');
    const { levels, counted } = await this.counters.lockChainAndCount(
      m,
      runId,
      jobGroupId,
      counterToken(m),
      delta,
      active,
      failed,
      commitAfter,
    );
    if (levels.length === 0) throw notFound(`job group ${jobGroupId}`);
    if (!counted) {
      const all = jobs.map((j) => ({ ...j, jobGroupId }));
      return { uncounted: await this.countSparedAll(m, runId, all, [...all.keys()]), cancellations: [] };
    }
    return { uncounted: [], cancellations: failed ? await this.failFast(m, runId, levels) : [] };
  }

  /**
   * Of the jobs not counted (`uncounted`: indexes in `jobs`), the always_run ones a cancellation left running are
   * counted now where no abort stopped them (countSpared). Returns those still not counted.
   */
  private async countSparedAll(
    m: EntityManager,
    runId: string,
    jobs: readonly { jobGroupId: number; outcome: JobOutcome; alwaysRun: boolean }[],
    uncounted: readonly number[],
  ): Promise<number[]> {
    const still: number[] = [];
    for (const i of uncounted) {
      const j = jobs[i];
      const spared =
        j.alwaysRun &&
        (await this.countSpared(m, await this.groups.lockChain(m, runId, j.jobGroupId), {
          ...outcomeDelta(j.outcome),
          nAlwaysRunOpen: -1,
        }));
      if (!spared) still.push(i);
    }
    return still;
  }

  /**
   * Fail-fast after a failure was counted into `levels` (locked; those that fail fast locked whole, their sums
   * current): the deepest level at its threshold is cancelled, then each ancestor at its own (the earlier
   * cancellation counted its jobs into them).
   */
  private async failFast(m: EntityManager, runId: string, levels: ChainLevel[]): Promise<Cancellation[]> {
    const made: Cancellation[] = [];
    for (let i = 0; i < levels.length; i++) {
      const l = levels[i];
      if (l.cancelAfterNFailures === null || !l.exact || l.exact.nFailed < l.cancelAfterNFailures) continue;
      const { cancellation, counted } = await this.groups.cancelLocked(
        m,
        runId,
        levels.slice(i),
        'system',
        'fail_fast',
      );
      made.push(cancellation);
      for (const above of levels.slice(i + 1))
        if (above.exact) {
          above.exact.nCompleted += counted.nCompleted ?? 0;
          above.exact.nCancelled += counted.nCancelled ?? 0;
          above.exact.nAborted += counted.nAborted ?? 0;
          above.exact.nAlwaysRunOpen = (above.exact.nAlwaysRunOpen ?? 0) + (counted.nAlwaysRunOpen ?? 0);
        }
    }
    return made;
  }

  /**
   * Counts jobs that a parent's failure ended (`perGroup`: direct jobs per group) as cancelled outcomes, and moves
   * the pending counts of the groups whose jobs left `pending` (`leftPending`: direct jobs per group, ended or
   * released): locks the transaction's rows of those groups, their ancestors and `alsoLock` (the finishing
   * parent's chain, counted right after; with `failuresNext`, failures: the fail-fast levels locked whole) in one
   * total order, leaves out ended jobs under a cancelled group (its cancellation counted them already). Returns
   * those left-out groups. The root's pending count is left to the caller's write of the root (locked last).
   */
  async countCascaded(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
    alsoLock: number[],
    leftPending: Map<number, number> = new Map(),
    failuresNext = false,
  ): Promise<{ uncountedGroups: number[] }> {
    // Only pending moves (no job ended): the root's share is the caller's, in its own write of the root.
    const withRoot = perGroup.size > 0;
    if (!withRoot && [...leftPending.keys()].every((g) => g === 0)) return { uncountedGroups: [] };
    const token = counterToken(m);
    const { rows, closure } = await this.counters.lockGroups(
      m,
      runId,
      [...new Set([...perGroup.keys(), ...leftPending.keys(), ...alsoLock])],
      token,
      withRoot,
      failuresNext,
    );
    const cancelled = new Set(rows.filter((r) => r.cancelled).map((r) => r.jobGroupId));
    const uncounted = new Set<number>();
    for (const c of closure) if (perGroup.has(c.jobGroupId) && cancelled.has(c.ancestorId)) uncounted.add(c.jobGroupId);
    const increments = new Map<number, { cancelled: number; pending: number }>();
    const at = (g: number) => {
      let i = increments.get(g);
      if (!i) increments.set(g, (i = { cancelled: 0, pending: 0 }));
      return i;
    };
    for (const c of closure) {
      const n = perGroup.get(c.jobGroupId);
      if (n !== undefined && !uncounted.has(c.jobGroupId)) at(c.ancestorId).cancelled += n;
      // Pending counts are raw (cancelled or not); the root's is moved by the caller.
      const left = leftPending.get(c.jobGroupId);
      if (left !== undefined && c.ancestorId !== 0) at(c.ancestorId).pending -= left;
    }
    await this.deltas.addCascadeCounts(m, runId, token, increments);
    return { uncountedGroups: [...uncounted] };
  }

  /**
   * An always_run job's outcome under a cancellation (chain locked, nothing counted yet): the cancellation left it
   * out of what it counted unless it was an abort, so it is counted now into every level. False under an abort (the
   * abort counted it). No fail-fast: the chain is cancelled already.
   */
  private async countSpared(m: EntityManager, chain: Chain, delta: CountsDelta): Promise<boolean> {
    const all = await this.tree.chainCancellations(chain.runId, chain.levels[0].jobGroupId, m);
    if (all.some((c) => cancelledJobOutcome(c).status === 'aborted')) return false;
    const ids = chain.levels.map((l) => l.jobGroupId);
    await this.deltas.addCounts(m, chain.runId, ids, counterToken(m), delta);
    return true;
  }

  /** Moves the run's active counts (on the root's row of the transaction's token). */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<void> {
    if (!d.nProvisioning && !d.nRunning && !d.nRetrying && !d.nPending) return;
    await this.deltas.moveActive(m, runId, counterToken(m), d);
  }
}
