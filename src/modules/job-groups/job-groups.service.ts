import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { required } from '../../common/required';
import { type Cancellation, cancelledJobOutcome, type JobOutcome, outcomeDelta } from '../lifecycle/outcomes';
import { MAX_DEPTH } from './dto/job-group.dto';
import {
  addTo,
  completeIds,
  effectiveCounts,
  type GroupStatusChange,
  groupStatus,
  type RootChange,
  type RootState,
  statusChanges,
  subtract,
} from './group-counts';
import { type GroupTreeRequest, planTree } from './group-tree';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import type { ActiveDelta, ChainLevel, Counts, CountsDelta } from './job-group-rows';
import { JobGroupsRepository } from './job-groups.repository';

// Types other modules import from here (their module's public face), wherever in this module they are defined.
export type { ActiveCounts, ActiveDelta, Counts } from './job-group-rows';
export type { GroupStatusChange, GroupTreeRequest, RootChange, RootState };

/** A group and its ancestors with their counters locked (deepest first), and the cancellation that applies, if any. */
export interface Chain {
  runId: string;
  levels: ChainLevel[];
  cancellation: Cancellation | null;
  /** Reason of a cancellation of group 0 itself (a stopped run), if any. */
  stopReason: string | null;
}

const groupCancelled = (id: number, c: Cancellation) =>
  new DomainError('GROUP_CANCELLED', `job group ${id} is cancelled (group ${c.jobGroupId}: ${c.reason})`, [
    { job_group_id: c.jobGroupId, reason: c.reason },
  ]);

/**
 * The job-group tree of a run: creation (closure rows written once), recursive counters, and cancellation that
 * writes O(depth) rows whatever the subtree holds. Methods taking an EntityManager run in the caller's transaction.
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
   * the `pending` ones (waiting for parents) into the run's root.
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
    await this.counters.addJobCounts(m, runId, recursive, alwaysRun, pending);
    await this.groups.setState(m, runId, [...recursive.keys()], 'running');
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

  /** Locks a group's chain; 404 when the group does not exist. */
  async lockChain(m: EntityManager, runId: string, jobGroupId: number): Promise<Chain> {
    const levels = await this.counters.lockChain(m, runId, jobGroupId);
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

  /**
   * Counts `n` new jobs (`alwaysRun` and `pending` of them so) into a locked chain; returns the groups whose status
   * changed (a complete one runs again).
   */
  async addJobs(m: EntityManager, chain: Chain, n: number, alwaysRun = 0, pending = 0): Promise<GroupStatusChange[]> {
    const ids = chain.levels.map((l) => l.jobGroupId);
    await this.counters.addCounts(m, chain.runId, ids, { nJobs: n, nAlwaysRunOpen: alwaysRun }, pending);
    await this.groups.setState(m, chain.runId, ids, 'running');
    return statusChanges(chain.levels.map((l) => ({ jobGroupId: l.jobGroupId, before: l, after: addTo(l, n) })));
  }

  /**
   * A job's final outcome: locks its chain and counts the outcome in the same statement unless a group above it is
   * cancelled (then the cancellation counted it already), then marks complete groups and applies fail-fast.
   */
  async countOutcome(
    m: EntityManager,
    runId: string,
    jobGroupId: number,
    outcome: JobOutcome,
    active: ActiveDelta,
    alwaysRun = false,
  ): Promise<{
    counted: boolean;
    root: RootChange;
    cancellations: Cancellation[];
    statusChanges: GroupStatusChange[];
  }> {
    const delta = { ...outcomeDelta(outcome), nAlwaysRunOpen: alwaysRun ? -1 : 0 };
    const { levels, counted } = await this.counters.lockChainAndCount(m, runId, jobGroupId, delta, active);
    if (levels.length === 0) throw notFound(`job group ${jobGroupId}`);
    const chain = await this.withCancellations(m, runId, jobGroupId, levels);
    if (!counted && alwaysRun) {
      const spared = await this.countSpared(m, chain, delta, active);
      if (spared) return spared;
    }
    const root = levels[levels.length - 1];
    const before = { counts: subtract(root, counted ? delta : {}, active), stopReason: chain.stopReason };
    if (!counted) return { counted, root: { before, after: this.rootOf(chain) }, cancellations: [], statusChanges: [] };
    // The chain before this outcome (none of its levels was cancelled, or it would not have been counted).
    const beforeLevels = levels.map((l) => ({ jobGroupId: l.jobGroupId, counts: subtract(l, delta, {}) }));
    const done = await this.afterCounting(m, chain, levels, outcome);
    const changes = statusChanges(
      levels.map((l, i) => ({
        jobGroupId: l.jobGroupId,
        before: beforeLevels[i].counts,
        after: l,
        // Fail-fast cancelled the level at `cancelledUpTo` and so every level below it in the chain.
        cancelledAfter: i <= done.cancelledUpTo,
      })),
    );
    return { counted, root: { before, after: done.root }, cancellations: done.cancellations, statusChanges: changes };
  }

  /**
   * Counts jobs that a parent's failure ended (`perGroup`: direct jobs per group) as cancelled outcomes, and moves
   * the pending counts of the groups whose jobs left `pending` (`leftPending`: direct jobs per group, ended or
   * released): locks the counters of those groups, their ancestors and `alsoLock` (the finishing parent's chain,
   * counted right after) in one total order, leaves out ended jobs under a cancelled group (its cancellation counted
   * them already), marks the groups that completed. Returns those left-out groups and the groups whose status
   * changed. The root's pending count is left to the caller's write of the root (locked last).
   */
  async countCascaded(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
    alsoLock: number[],
    leftPending: Map<number, number> = new Map(),
  ): Promise<{ uncountedGroups: number[]; statusChanges: GroupStatusChange[] }> {
    // Only pending moves (no job ended): the root's share is the caller's, in its own write of the root.
    const withRoot = perGroup.size > 0;
    if (!withRoot && [...leftPending.keys()].every((g) => g === 0)) return { uncountedGroups: [], statusChanges: [] };
    const { rows, closure } = await this.counters.lockGroups(
      m,
      runId,
      [...new Set([...perGroup.keys(), ...leftPending.keys(), ...alsoLock])],
      withRoot,
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
    // Rows whose only move is their pending count changed no status.
    const updated = (await this.counters.addCascadeCounts(m, runId, increments)).filter(
      (u) => (increments.get(u.jobGroupId)?.cancelled ?? 0) > 0,
    );
    await this.groups.setState(m, runId, completeIds(updated), 'complete');
    const before = new Map(rows.map((r) => [r.jobGroupId, r]));
    const changes = statusChanges(
      updated.map((u) => ({
        jobGroupId: u.jobGroupId,
        before: required(before.get(u.jobGroupId), `the locked counters of group ${u.jobGroupId}`),
        after: u,
      })),
    );
    return { uncountedGroups: [...uncounted], statusChanges: changes };
  }

  /**
   * An always_run job's outcome under a cancellation (chain locked, nothing counted yet): the cancellation left it
   * out of what it counted unless it was an abort, so it is counted now into every level. Null under an abort (the
   * abort counted it). No fail-fast: the chain is cancelled already.
   */
  private async countSpared(
    m: EntityManager,
    chain: Chain,
    delta: CountsDelta,
    active: ActiveDelta,
  ): Promise<{
    counted: boolean;
    root: RootChange;
    cancellations: Cancellation[];
    statusChanges: GroupStatusChange[];
  } | null> {
    const all = await this.groups.chainCancellations(chain.runId, chain.levels[0].jobGroupId, m);
    if (all.some((c) => cancelledJobOutcome(c).status === 'aborted')) return null;
    const ids = chain.levels.map((l) => l.jobGroupId);
    const updated = await this.counters.addCounts(m, chain.runId, ids, delta);
    const after = new Map(updated.map((u) => [u.jobGroupId, u]));
    // A level is under the cancellation when it or a level above it (later in the chain) is cancelled.
    const under = chain.levels.map((_, i) => chain.levels.slice(i).some((l) => l.cancelled));
    const changes: GroupStatusChange[] = [];
    chain.levels.forEach((l, i) => {
      const now = required(after.get(l.jobGroupId), `the counters of group ${l.jobGroupId}`);
      const was = groupStatus(effectiveCounts(l, under[i]), under[i]);
      const is = groupStatus(effectiveCounts(now, under[i]), under[i]);
      if (was !== is) changes.push({ jobGroupId: l.jobGroupId, status: is });
    });
    await this.groups.setState(m, chain.runId, completeIds(updated), 'complete');
    const root = chain.levels[chain.levels.length - 1];
    const rootAfter = { ...root, ...required(after.get(root.jobGroupId), 'the root counters') };
    return {
      counted: true,
      root: {
        before: { counts: subtract(rootAfter, delta, active), stopReason: chain.stopReason },
        after: { counts: rootAfter, stopReason: chain.stopReason },
      },
      cancellations: [],
      statusChanges: changes,
    };
  }

  /** Moves the run's active counts on its root's counters row (locking it, if the caller hasn't yet). */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<RootChange> {
    const row = await this.counters.moveActive(m, runId, d);
    // A stopped run is rare: only then is the reason looked up.
    const stopReason = row.cancelled ? ((await this.groups.chainCancellations(runId, 0, m))[0]?.reason ?? null) : null;
    return { before: { counts: subtract(row, {}, d), stopReason }, after: { counts: row, stopReason } };
  }

  /** After an outcome was counted into `levels` (current counts): complete groups, fail-fast, the root's state. */
  private async afterCounting(
    m: EntityManager,
    chain: Chain,
    levels: ChainLevel[],
    outcome: JobOutcome,
  ): Promise<{ cancellations: Cancellation[]; root: RootState; cancelledUpTo: number }> {
    await this.groups.setState(m, chain.runId, completeIds(levels), 'complete');
    const made: Cancellation[] = [];
    let cancelledUpTo = -1;
    if (outcome === 'failed') {
      for (let i = 0; i < levels.length; i++) {
        const l = levels[i];
        if (l.cancelAfterNFailures === null || l.nFailed < l.cancelAfterNFailures) continue;
        const { cancellation, updated } = await this.cancelLocked(
          m,
          chain.runId,
          levels.slice(i),
          'system',
          'fail_fast',
        );
        made.push(cancellation);
        cancelledUpTo = i;
        for (const u of updated)
          Object.assign(
            required(
              levels.find((x) => x.jobGroupId === u.jobGroupId),
              `group ${u.jobGroupId} in the locked chain`,
            ),
            u,
          );
      }
    }
    const stop = made.find((c) => c.jobGroupId === 0);
    return {
      cancellations: made,
      root: { counts: { ...levels[levels.length - 1] }, stopReason: stop?.reason ?? chain.stopReason },
      cancelledUpTo,
    };
  }

  /** The root's state as a locked chain holds it (the chain's last level is group 0, locked and current). */
  private rootOf(chain: Chain): RootState {
    return { counts: { ...chain.levels[chain.levels.length - 1] }, stopReason: chain.stopReason };
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
  ): Promise<{ cancellation: Cancellation; created: boolean; statusChanges: GroupStatusChange[] }> {
    const chain = await this.lockChain(m, runId, jobGroupId);
    if (chain.cancellation) return { cancellation: chain.cancellation, created: false, statusChanges: [] };
    const { cancellation, updated } = await this.cancelLocked(m, runId, chain.levels, by, reason);
    // The cancelled group's own change is the cancellation; its ancestors may have completed with it.
    const ancestors = chain.levels.slice(1).map((l) => ({
      jobGroupId: l.jobGroupId,
      before: l,
      after: updated.find((u) => u.jobGroupId === l.jobGroupId) ?? l,
    }));
    return { cancellation, created: true, statusChanges: statusChanges(ancestors) };
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
    const chain = await this.lockChain(m, runId, 0);
    if (chain.cancellation) return { cancellation: chain.cancellation, created: false };
    const root = chain.levels[0];
    if (root.nJobs > 0 && root.nCompleted === root.nJobs) return null;
    return { cancellation: (await this.cancelLocked(m, runId, chain.levels, by, reason)).cancellation, created: true };
  }

  /** `levels` starts at the group to cancel, counters locked and current. Jobs not yet counted become cancelled. */
  private async cancelLocked(
    m: EntityManager,
    runId: string,
    levels: ChainLevel[],
    by: string,
    reason: string,
  ): Promise<{ cancellation: Cancellation; updated: (Counts & { jobGroupId: number })[] }> {
    const target = levels[0];
    const cancellation = await this.groups.insertCancellation(m, runId, target.jobGroupId, by, reason);
    await this.counters.markCancelled(m, runId, target.jobGroupId);
    // always_run jobs go on running (and are counted when they finish) unless this is an abort, which stops them.
    const abort = cancelledJobOutcome(cancellation).status === 'aborted';
    const open = target.nAlwaysRunOpen ?? 0;
    const k = target.nJobs - target.nCompleted - (abort ? 0 : open);
    if (k === 0) return { cancellation, updated: [] };
    const updated = await this.counters.addCounts(
      m,
      runId,
      levels.map((l) => l.jobGroupId),
      { nCompleted: k, nCancelled: k, nAborted: abort ? k : 0, nAlwaysRunOpen: abort ? -open : 0 },
    );
    await this.groups.setState(m, runId, completeIds(updated), 'complete');
    return { cancellation, updated };
  }

  /** Cancellations whose queued submissions are not all terminated yet, oldest first. */
  unswept(limit: number): Promise<(Cancellation & { runId: string })[]> {
    return this.groups.unswept(limit);
  }

  markSwept(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    return this.groups.markSwept(m, runId, jobGroupId);
  }
}
