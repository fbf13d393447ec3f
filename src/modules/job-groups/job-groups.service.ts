import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { required } from '../../common/required';
import {
  ABORT_REASON,
  type Cancellation,
  cancelledJobOutcome,
  type JobOutcome,
  outcomeDelta,
} from '../lifecycle/outcomes';
import { counterToken } from './counter-tokens';
import { MAX_DEPTH } from './dto/job-group.dto';
import {
  announced,
  type GroupSettlement,
  type GroupStatusChange,
  type RootState,
  toCancellation,
  unsettled,
  viewStatus,
} from './group-counts';
import { type GroupTreeRequest, planTree } from './group-tree';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import type { ActiveDelta, ChainLevel, CountsDelta } from './job-group-rows';
import { JobGroupsRepository } from './job-groups.repository';

// Types other modules import from here (their module's public face), wherever in this module they are defined.
export type { ActiveCounts, ActiveDelta, Counts } from './job-group-rows';
export type { GroupSettlement, GroupStatusChange, GroupTreeRequest, RootState };
export { announced, unsettled };

/**
 * A group and its ancestors with their counter rows locked (deepest first: the transaction's token row at each level,
 * all rows at the levels locked whole), and the cancellation that applies, if any.
 */
export interface Chain {
  runId: string;
  levels: ChainLevel[];
  cancellation: Cancellation | null;
  /** Reason of a cancellation of group 0 itself (a stopped run), if any. */
  stopReason: string | null;
}

/** The sum of two counts deltas. */
function addCounts(a: CountsDelta, b: CountsDelta): CountsDelta {
  const out: CountsDelta = { ...a };
  for (const [k, v] of Object.entries(b) as [keyof CountsDelta, number | undefined][])
    out[k] = (out[k] ?? 0) + (v ?? 0);
  return out;
}

const groupCancelled = (id: number, c: Cancellation) =>
  new DomainError('GROUP_CANCELLED', `job group ${id} is cancelled (group ${c.jobGroupId}: ${c.reason})`, [
    { job_group_id: c.jobGroupId, reason: c.reason },
  ]);

/**
 * The job-group tree of a run: creation (closure rows written once), recursive counters, and cancellation that
 * writes O(depth) rows whatever the subtree holds. Methods taking an EntityManager run in the caller's transaction.
 *
 * Counters are spread over token rows (counter-tokens.ts): a transaction writes its deltas on its own token's rows,
 * so no row is hot. What must be read whole is locked whole: the target of a cancellation (every job not yet
 * counted is cancelled: nothing may be counted beside it) and, for a failure, the levels that fail fast (the Nth
 * failure cancels, exactly once). Group and run statuses follow the commits (see settle, in RunStatusService).
 */
@Injectable()
export class JobGroupsService {
  constructor(
    private readonly groups: JobGroupsRepository,
    private readonly counters: JobGroupCountersRepository,
  ) {}

  /** Root group 0 plus the request's groups (by `ref`). Returns each ref's group id and each group's chain. */
  async createTree(
    m: EntityManager,
    runId: string,
    root: { cancelAfterNFailures?: number },
    requested: GroupTreeRequest[],
  ): Promise<{ ids: Map<string, number>; ancestors: Map<number, number[]> }> {
    const { rows, ids, ancestors } = planTree(root, requested);
    await this.groups.insertGroups(m, runId, rows, ancestors);
    return { ids, ancestors };
  }

  /**
   * Counts new jobs of a new run into their groups and every ancestor (`jobsPerGroup`: direct jobs per group), and
   * the `pending` ones (waiting for parents). Groups that now hold jobs record `running` at once: a new run's groups
   * announce nothing.
   */
  async countNewJobs(
    m: EntityManager,
    runId: string,
    ancestors: Map<number, number[]>,
    jobsPerGroup: Map<number, number>,
    alwaysRunPerGroup: Map<number, number> = new Map(),
    pendingPerGroup: Map<number, number> = new Map(),
  ): Promise<void> {
    const recursive = new Map<number, number>();
    const alwaysRun = new Map<number, number>();
    const pending = new Map<number, number>();
    for (const [g, n] of jobsPerGroup)
      for (const a of required(ancestors.get(g), `the ancestors of group ${g}`)) {
        recursive.set(a, (recursive.get(a) ?? 0) + n);
        alwaysRun.set(a, (alwaysRun.get(a) ?? 0) + (alwaysRunPerGroup.get(g) ?? 0));
        pending.set(a, (pending.get(a) ?? 0) + (pendingPerGroup.get(g) ?? 0));
      }
    await this.counters.addJobCounts(m, runId, counterToken(m), recursive, alwaysRun, pending);
    await this.groups.setStatuses(
      m,
      runId,
      [...recursive.keys()].map((jobGroupId) => ({ jobGroupId, status: 'running', state: 'running' })),
    );
  }

  /** A new group under `parentId`; refused under a cancelled group and below depth 5. */
  async createGroup(
    m: EntityManager,
    runId: string,
    parentId: number,
    attributes: Record<string, unknown>,
    cancelAfterNFailures: number | null,
  ): Promise<number> {
    const chain = await this.lockChain(m, runId, parentId);
    if (chain.cancellation) throw groupCancelled(parentId, chain.cancellation);
    const depth = chain.levels.length;
    if (depth > MAX_DEPTH)
      throw new DomainError(
        'MAX_DEPTH_EXCEEDED',
        `a group under ${parentId} would be at depth ${depth}; at most ${MAX_DEPTH} levels below the root`,
      );
    const id = await this.groups.nextGroupId(m, runId);
    await this.groups.insertGroups(
      m,
      runId,
      [{ jobGroupId: id, parentId, depth, attributes, cancelAfterNFailures }],
      new Map([[id, [id, ...chain.levels.map((l) => l.jobGroupId)]]]),
    );
    return id;
  }

  /** Locks a group's chain (`exactIds`: levels locked whole); 404 when the group does not exist. */
  async lockChain(m: EntityManager, runId: string, jobGroupId: number, exactIds: number[] = []): Promise<Chain> {
    const levels = await this.counters.lockChain(m, runId, jobGroupId, counterToken(m), exactIds);
    if (levels.length === 0) throw notFound(`job group ${jobGroupId}`);
    return this.withCancellations(m, runId, jobGroupId, levels);
  }

  /** The cancellation records behind a locked chain's flags (read only when a flag is set: rarely). */
  private async withCancellations(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    levels: ChainLevel[],
  ): Promise<Chain> {
    if (!levels.some((l) => l.cancelled)) return { runId, levels, cancellation: null, stopReason: null };
    const cancellations = await this.groups.chainCancellations(runId, jobGroupId, m);
    const stop = cancellations.find((c) => c.jobGroupId === 0);
    return { runId, levels, cancellation: cancellations[0] ?? null, stopReason: stop?.reason ?? null };
  }

  /** Locks a group's chain for adding jobs to it: refused (409) when the group or an ancestor is cancelled. */
  async lockForNewJobs(m: EntityManager, runId: string, jobGroupId: number): Promise<Chain> {
    const chain = await this.lockChain(m, runId, jobGroupId);
    if (chain.cancellation) throw groupCancelled(jobGroupId, chain.cancellation);
    return chain;
  }

  /** Counts `n` new jobs (`alwaysRun` and `pending` of them so) into a locked chain. */
  async addJobs(m: EntityManager, chain: Chain, n: number, alwaysRun = 0, pending = 0): Promise<void> {
    const ids = chain.levels.map((l) => l.jobGroupId);
    await this.counters.addCounts(
      m,
      chain.runId,
      ids,
      counterToken(m),
      { nJobs: n, nAlwaysRunOpen: alwaysRun },
      pending,
    );
  }

  /**
   * A job's final outcome: locks its chain and counts the outcome in the same statement unless a group above it is
   * cancelled (then the cancellation counted it already), then applies fail-fast. A failure locks the levels that
   * fail fast whole, so their failure counts are exact: the Nth failure cancels, in this transaction, once.
   * Returns whether it was counted and the fail-fast cancellations it made.
   */
  async countOutcome(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    outcome: JobOutcome,
    active: ActiveDelta,
    alwaysRun = false,
  ): Promise<{ counted: boolean; cancellations: Cancellation[] }> {
    const delta = { ...outcomeDelta(outcome), nAlwaysRunOpen: alwaysRun ? -1 : 0 };
    const token = counterToken(m);
    const failed = outcome === 'failed';
    const { levels, counted } = await this.counters.lockChainAndCount(
      m,
      runId,
      jobGroupId,
      token,
      delta,
      active,
      failed,
    );
    if (levels.length === 0) throw notFound(`job group ${jobGroupId}`);
    if (!counted && alwaysRun) {
      const chain = await this.withCancellations(m, runId, jobGroupId, levels);
      return { counted: await this.countSpared(m, chain, delta), cancellations: [] };
    }
    if (!counted || !failed) return { counted, cancellations: [] };
    return { counted, cancellations: await this.failFast(m, runId, levels) };
  }

  /**
   * Final outcomes of several jobs of one run, counted together (one transaction): each job's outcome goes into
   * every level of its chain on the transaction's token rows, unless a level of its chain is cancelled (that
   * cancellation counted it already); the run's active counts move by `active` either way. With failures, the levels
   * that fail fast are locked whole and cancelled where their failures reach the threshold, once (failures in the
   * same call count together, then the threshold is checked). Returns which of `jobs` were not counted (by index),
   * and the fail-fast cancellations made. A lone chain is locked and counted in one statement.
   */
  async countOutcomes(
    m: EntityManager,
    runId: string,
    jobs: readonly { jobGroupId: number; outcome: JobOutcome; alwaysRun: boolean }[],
    active: ActiveDelta,
  ): Promise<{ uncounted: number[]; cancellations: Cancellation[] }> {
    const groupIds = [...new Set(jobs.map((j) => j.jobGroupId))];
    if (groupIds.length === 1) return this.countOneChain(m, runId, groupIds[0], jobs, active);
    const token = counterToken(m);
    const failed = jobs.some((j) => j.outcome === 'failed');
    const rows = await this.counters.lockChains(m, runId, groupIds, token, failed);
    const cancelledBelow = new Set(rows.filter((r) => r.cancelled).flatMap((r) => r.below));
    const perLevel = new Map<number, CountsDelta>();
    let uncounted: number[] = [];
    const chainOf = (g: number) => [...new Set(rows.filter((r) => r.below.includes(g)).map((r) => r.jobGroupId))];
    jobs.forEach((j, i) => {
      if (cancelledBelow.has(j.jobGroupId)) return void uncounted.push(i);
      const d = { ...outcomeDelta(j.outcome), nAlwaysRunOpen: j.alwaysRun ? -1 : 0 };
      for (const level of chainOf(j.jobGroupId)) perLevel.set(level, addCounts(perLevel.get(level) ?? {}, d));
    });
    if (rows.every((r) => r.jobGroupId !== 0)) throw notFound(`job groups ${groupIds.join(', ')}`);
    await this.counters.addLevelCounts(m, runId, token, perLevel, active);
    uncounted = await this.countSparedAll(m, runId, jobs, uncounted);
    if (!failed) return { uncounted, cancellations: [] };
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
      const chain = await this.lockChain(m, runId, g, [g]);
      if (chain.cancellation) continue;
      cancellations.push((await this.cancelLocked(m, runId, chain.levels, 'system', 'fail_fast')).cancellation);
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
  ): Promise<{ uncounted: number[]; cancellations: Cancellation[] }> {
    let delta: CountsDelta = {};
    for (const j of jobs)
      delta = addCounts(delta, { ...outcomeDelta(j.outcome), nAlwaysRunOpen: j.alwaysRun ? -1 : 0 });
    const failed = jobs.some((j) => j.outcome === 'failed');
    const { levels, counted } = await this.counters.lockChainAndCount(
      m,
      runId,
      jobGroupId,
      counterToken(m),
      delta,
      active,
      failed,
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
        (await this.countSpared(m, await this.lockChain(m, runId, j.jobGroupId), {
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
      const { cancellation, counted } = await this.cancelLocked(m, runId, levels.slice(i), 'system', 'fail_fast');
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
    await this.counters.addCascadeCounts(m, runId, token, increments);
    return { uncountedGroups: [...uncounted] };
  }

  /**
   * An always_run job's outcome under a cancellation (chain locked, nothing counted yet): the cancellation left it
   * out of what it counted unless it was an abort, so it is counted now into every level. False under an abort (the
   * abort counted it). No fail-fast: the chain is cancelled already.
   */
  private async countSpared(m: EntityManager, chain: Chain, delta: CountsDelta): Promise<boolean> {
    const all = await this.groups.chainCancellations(chain.runId, chain.levels[0].jobGroupId, m);
    if (all.some((c) => cancelledJobOutcome(c).status === 'aborted')) return false;
    const ids = chain.levels.map((l) => l.jobGroupId);
    await this.counters.addCounts(m, chain.runId, ids, counterToken(m), delta);
    return true;
  }

  /** Moves the run's active counts (on the root's row of the transaction's token). */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<void> {
    if (!d.nProvisioning && !d.nRunning && !d.nRetrying && !d.nPending) return;
    await this.counters.moveActive(m, runId, counterToken(m), d);
  }

  /**
   * Cancels a group: one row in job_groups_cancelled plus counter adjustments on it and its ancestors, whatever
   * the subtree holds. Idempotent: when the group (or an ancestor) is already cancelled, returns that record.
   */
  async cancel(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    by: string,
    reason: string,
  ): Promise<{ cancellation: Cancellation; created: boolean }> {
    const chain = await this.lockChain(m, runId, jobGroupId, [jobGroupId]);
    if (chain.cancellation) return { cancellation: chain.cancellation, created: false };
    return { cancellation: (await this.cancelLocked(m, runId, chain.levels, by, reason)).cancellation, created: true };
  }

  /**
   * Stopping a run: cancels group 0 unless every job is already counted complete (a finished run stays as it is).
   * Returns the cancellation in force (`created` when this call made it), or null for a finished run.
   */
  async stopRoot(
    m: EntityManager,
    runId: string,
    by: string,
    reason: string,
  ): Promise<{ cancellation: Cancellation; created: boolean } | null> {
    const chain = await this.lockChain(m, runId, 0, [0]);
    if (chain.cancellation) return { cancellation: chain.cancellation, created: false };
    const root = required(chain.levels[0].exact, 'the root counters, locked whole');
    if (root.nJobs > 0 && root.nCompleted === root.nJobs) return null;
    return { cancellation: (await this.cancelLocked(m, runId, chain.levels, by, reason)).cancellation, created: true };
  }

  /**
   * `levels` starts at the group to cancel, locked whole (its sums current), then its ancestors (the transaction's
   * rows locked). Jobs not yet counted become cancelled: counted on the transaction's rows of every level.
   */
  private async cancelLocked(
    m: EntityManager,
    runId: string,
    levels: ChainLevel[],
    by: string,
    reason: string,
  ): Promise<{ cancellation: Cancellation; counted: CountsDelta }> {
    const target = required(levels[0].exact, `the counters of group ${levels[0].jobGroupId}, locked whole`);
    const cancellation = await this.groups.insertCancellation(m, runId, levels[0].jobGroupId, by, reason);
    await this.counters.markCancelled(m, runId, levels[0].jobGroupId);
    // always_run jobs go on running (and are counted when they finish) unless this is an abort, which stops them.
    const abort = cancelledJobOutcome(cancellation).status === 'aborted';
    const open = target.nAlwaysRunOpen ?? 0;
    const k = target.nJobs - target.nCompleted - (abort ? 0 : open);
    if (k === 0) return { cancellation, counted: {} };
    const counted = { nCompleted: k, nCancelled: k, nAborted: abort ? k : 0, nAlwaysRunOpen: abort ? -open : 0 };
    await this.counters.addCounts(
      m,
      runId,
      levels.map((l) => l.jobGroupId),
      counterToken(m),
      counted,
    );
    return { cancellation, counted };
  }

  /**
   * What a settle compares, for each run of `work` (runs, each with groups of it): the run's root state (its
   * counters summed and its stop), and each group asked and every ancestor as its view shows it now against what it
   * last recorded. Read in one statement (one snapshot of `m`), without a lock: see RunStatusService's settle.
   */
  async settleInputs(
    m: EntityManager,
    work: ReadonlyMap<string, ReadonlySet<number>>,
  ): Promise<Map<string, { root: RootState; groups: GroupSettlement[] }>> {
    const asked = [...work].flatMap(([runId, groups]) => [0, ...groups].map((jobGroupId) => ({ runId, jobGroupId })));
    const out = new Map<string, { root: RootState; groups: GroupSettlement[] }>();
    for (const r of await this.counters.settleInputs(m, asked, ABORT_REASON)) {
      let run = out.get(r.runId);
      if (r.jobGroupId === 0) {
        const root = { counts: r, stopReason: r.stopReason };
        if (run) run.root = root;
        else out.set(r.runId, (run = { root, groups: [] }));
      } else if (!run) out.set(r.runId, (run = { root: { counts: r, stopReason: null }, groups: [] }));
      const spareAlwaysRun = !r.aborted;
      run.groups.push({
        jobGroupId: r.jobGroupId,
        stored: { status: r.status, state: r.state },
        now: viewStatus(r, r.cancelled, spareAlwaysRun),
        explained: r.cancelled,
      });
    }
    return out;
  }

  /** Records what settlements found (status and state), in the caller's transaction. */
  async recordSettled(m: EntityManager, runId: string, settled: readonly GroupSettlement[]): Promise<void> {
    await this.groups.setStatuses(
      m,
      runId,
      settled.map((s) => ({ jobGroupId: s.jobGroupId, ...s.now })),
    );
  }

  /** Cancellations whose queued submissions are not all terminated yet, oldest first. */
  unswept(limit: number): Promise<(Cancellation & { runId: string })[]> {
    return this.groups.unswept(limit);
  }

  markSwept(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    return this.groups.markSwept(m, runId, jobGroupId);
  }
}

export { toCancellation };
