import type { StatementRider } from '../../infra/database/rider';
import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import {
  abortOf,
  type Cancellation,
  cancelledJobOutcome,
  type JobOutcome,
  outcomeDelta,
  stopsAlwaysRun,
} from '../lifecycle/outcomes';
import { GroupCounts, GroupStatus, JobGroupView, MAX_DEPTH, toCancellationView } from './dto/job-group.dto';
import type { DirectOutcomes } from '../jobs/jobs.service';
import { JobGroup } from './entities/job-group.entity';
import {
  ActiveCounts,
  ActiveDelta,
  ChainLevel,
  Counts,
  CountsDelta,
  JobGroupsRepository,
  NewGroup,
} from './job-groups.repository';
import { required } from '../../common/required';

export type { ActiveCounts, ActiveDelta, Counts };

/** A group and its ancestors with their counters locked (deepest first), and the cancellation that applies, if any. */
export interface Chain {
  runId: string;
  levels: ChainLevel[];
  cancellation: Cancellation | null;
  /** Reason of a cancellation of group 0 itself (a stopped run), if any. */
  stopReason: string | null;
}

/** A group whose status (as its view shows it) changed in the caller's transaction, and its new status. */
export interface GroupStatusChange {
  jobGroupId: number;
  status: GroupStatus;
}

export interface GroupTreeRequest {
  ref: string;
  parentRef?: string;
  attributes?: Record<string, unknown>;
  cancelAfterNFailures?: number;
}

/** What a run's status derives from: its root group's counters and active counts, and a stop (group 0 cancelled). */
export interface RootState {
  counts: Counts & ActiveCounts;
  stopReason: string | null;
}

/**
 * A transaction's change to a run's root, both ends taken while holding the root's counters row: the state it
 * found (the last committed one) and the state it leaves.
 */
export interface RootChange {
  before: RootState;
  after: RootState;
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
  constructor(private readonly groups: JobGroupsRepository) {}

  /** Root group 0 plus the request's groups (by `ref`). Returns each ref's group id and each group's chain. */
  async createTree(
    m: EntityManager,
    runId: string,
    root: { cancelAfterNFailures?: number },
    requested: GroupTreeRequest[],
  ): Promise<{ ids: Map<string, number>; ancestors: Map<number, number[]> }> {
    const ids = new Map<string, number>();
    const byRef = new Map<string, GroupTreeRequest>();
    requested.forEach((g, i) => {
      if (byRef.has(g.ref)) throw fieldError(`job_groups[${i}].ref`, `duplicates ref ${g.ref}`);
      byRef.set(g.ref, g);
    });
    const rows: NewGroup[] = [
      {
        jobGroupId: 0,
        parentId: null,
        depth: 0,
        attributes: {},
        cancelAfterNFailures: root.cancelAfterNFailures ?? null,
      },
    ];
    const ancestors = new Map<number, number[]>([[0, [0]]]);
    const place = (g: GroupTreeRequest, path: string[]): number => {
      const known = ids.get(g.ref);
      if (known !== undefined) return known;
      if (path.includes(g.ref))
        throw fieldError('job_groups', `parent_ref cycle through ${[...path, g.ref].join(' → ')}`);
      let parentId = 0;
      if (g.parentRef !== undefined) {
        const parent = byRef.get(g.parentRef);
        if (!parent) throw fieldError('job_groups.parent_ref', `names unknown ref ${g.parentRef}`);
        parentId = place(parent, [...path, g.ref]);
      }
      const chain = [rows.length, ...required(ancestors.get(parentId), `the ancestors of group ${parentId}`)];
      const depth = chain.length - 1;
      if (depth > MAX_DEPTH)
        throw new DomainError(
          'MAX_DEPTH_EXCEEDED',
          `job group ${g.ref} would be at depth ${depth}; at most ${MAX_DEPTH} levels below the root`,
        );
      const id = rows.length;
      rows.push({
        jobGroupId: id,
        parentId,
        depth,
        attributes: g.attributes ?? {},
        cancelAfterNFailures: g.cancelAfterNFailures ?? null,
      });
      ancestors.set(id, chain);
      ids.set(g.ref, id);
      return id;
    };
    requested.forEach((g) => place(g, []));
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
    pending = 0,
  ): Promise<void> {
    const recursive = new Map<number, number>();
    const alwaysRun = new Map<number, number>();
    for (const [g, n] of jobsPerGroup)
      for (const a of required(ancestors.get(g), `the ancestors of group ${g}`)) {
        recursive.set(a, (recursive.get(a) ?? 0) + n);
        alwaysRun.set(a, (alwaysRun.get(a) ?? 0) + (alwaysRunPerGroup.get(g) ?? 0));
      }
    await this.groups.addJobCounts(m, runId, recursive, alwaysRun, pending);
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
    const levels = await this.groups.lockChain(m, runId, jobGroupId);
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
    await this.groups.addCounts(m, chain.runId, ids, { nJobs: n, nAlwaysRunOpen: alwaysRun }, pending);
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
    rider?: StatementRider,
  ): Promise<{
    counted: boolean;
    root: RootChange;
    cancellations: Cancellation[];
    statusChanges: GroupStatusChange[];
  }> {
    const delta = { ...outcomeDelta(outcome), nAlwaysRunOpen: alwaysRun ? -1 : 0 };
    const { levels, counted } = await this.groups.lockChainAndCount(m, runId, jobGroupId, delta, active, rider);
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
   * Counts jobs that a parent's failure ended (`perGroup`: direct jobs per group) as cancelled outcomes: locks the
   * counters of those groups, their ancestors and `alsoLock` (the finishing parent's chain, counted right after) in
   * one total order, leaves out jobs under a cancelled group (its cancellation counted them already), marks the
   * groups that completed. Returns those left-out groups and the groups whose status changed.
   */
  async countCascaded(
    m: EntityManager,
    runId: string,
    perGroup: Map<number, number>,
    alsoLock: number[],
  ): Promise<{ uncountedGroups: number[]; statusChanges: GroupStatusChange[] }> {
    const { rows, closure } = await this.groups.lockGroups(m, runId, [...new Set([...perGroup.keys(), ...alsoLock])]);
    const cancelled = new Set(rows.filter((r) => r.cancelled).map((r) => r.jobGroupId));
    const uncounted = new Set<number>();
    for (const c of closure) if (perGroup.has(c.jobGroupId) && cancelled.has(c.ancestorId)) uncounted.add(c.jobGroupId);
    const increments = new Map<number, number>();
    for (const c of closure) {
      const n = perGroup.get(c.jobGroupId);
      if (n === undefined || uncounted.has(c.jobGroupId)) continue;
      increments.set(c.ancestorId, (increments.get(c.ancestorId) ?? 0) + n);
    }
    const updated = await this.groups.addCancelledCounts(m, runId, increments);
    await this.groups.setState(
      m,
      runId,
      updated.filter((u) => u.nCompleted === u.nJobs).map((u) => u.jobGroupId),
      'complete',
    );
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
    const updated = await this.groups.addCounts(m, chain.runId, ids, delta);
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
    await this.groups.setState(
      m,
      chain.runId,
      updated.filter((u) => u.nCompleted === u.nJobs).map((u) => u.jobGroupId),
      'complete',
    );
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
    const row = await this.groups.moveActive(m, runId, d);
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
    await this.groups.setState(
      m,
      chain.runId,
      levels.filter((l) => l.nCompleted === l.nJobs).map((l) => l.jobGroupId),
      'complete',
    );
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
    await this.groups.markCancelled(m, runId, target.jobGroupId);
    // always_run jobs go on running (and are counted when they finish) unless this is an abort, which stops them.
    const abort = cancelledJobOutcome(cancellation).status === 'aborted';
    const open = target.nAlwaysRunOpen ?? 0;
    const k = target.nJobs - target.nCompleted - (abort ? 0 : open);
    if (k === 0) return { cancellation, updated: [] };
    const updated = await this.groups.addCounts(
      m,
      runId,
      levels.map((l) => l.jobGroupId),
      { nCompleted: k, nCancelled: k, nAborted: abort ? k : 0, nAlwaysRunOpen: abort ? -open : 0 },
    );
    await this.groups.setState(
      m,
      runId,
      updated.filter((u) => u.nCompleted === u.nJobs).map((u) => u.jobGroupId),
      'complete',
    );
    return { cancellation, updated };
  }

  /** The root's counters and its cancellation reason, read fresh (call with the run row locked). */
  async rootState(m: EntityManager, runId: string): Promise<RootState> {
    const counts = await this.groups.countsOf(runId, 0, m);
    if (!counts) throw notFound('job group 0');
    const [root] = await this.groups.chainCancellations(runId, 0, m);
    return { counts, stopReason: root?.reason ?? null };
  }

  /** Every cancellation over a group (its own and its ancestors'), earliest first. */
  chainCancellations(runId: string, jobGroupId: number, m?: EntityManager): Promise<Cancellation[]> {
    return this.groups.chainCancellations(runId, jobGroupId, m);
  }

  /** The cancellation in force for a group (its own or an ancestor's), or null. */
  async cancellationOf(runId: string, jobGroupId: number, m?: EntityManager): Promise<Cancellation | null> {
    const [c = null] = await this.groups.chainCancellations(runId, jobGroupId, m);
    return c;
  }

  /** Cancellations whose queued submissions are not all terminated yet, oldest first. */
  unswept(limit: number): Promise<(Cancellation & { runId: string })[]> {
    return this.groups.unswept(limit);
  }

  markSwept(m: EntityManager, runId: string, jobGroupId: number): Promise<void> {
    return this.groups.markSwept(m, runId, jobGroupId);
  }

  /**
   * Invariant 1: every group's counts (as shown) equal the sum over the jobs of its whole subtree, where a job
   * not yet counted is cancelled if a group above it is cancelled and active otherwise. `direct` are per-group
   * job tallies from the jobs module. Returns one line per mismatch.
   */
  async counterMismatches(direct: DirectOutcomes[]): Promise<string[]> {
    const cancellations = await this.effectiveCancellations(await this.groups.cancelledRunIds());
    const key = (run: string, g: number) => `${run}/${g}`;
    const expected = new Map<string, GroupCounts>();
    const expectedAborted = new Map<string, number>();
    const expectedOpen = new Map<string, number>();
    const abortedBy = (runId: string, g: number) => {
      const c = cancellations.get(runId)?.get(g);
      return c !== undefined && cancelledJobOutcome(c).status === 'aborted';
    };
    /** An abort lies over the group (maybe above its earliest cancellation): always_run jobs there are stopped. */
    const abortOver = (runId: string, g: number) => abortOf(cancellations.get(runId)?.get(g)) !== null;
    const tally = new Map(direct.map((d) => [key(d.runId, d.jobGroupId), d]));
    for (const { runId, jobGroupId, ancestorId } of await this.groups.allClosure()) {
      const d = tally.get(key(runId, jobGroupId));
      if (!d) continue;
      const cancelledBelow = cancellations.get(runId)?.has(jobGroupId) ?? false;
      const e = expected.get(key(runId, ancestorId)) ?? {
        n_jobs: 0,
        n_completed: 0,
        n_succeeded: 0,
        n_failed: 0,
        n_cancelled: 0,
      };
      // Uncounted always_run jobs below a cancellation still run (count later) unless it was an abort.
      const stopped = d.nUncounted - (abortOver(runId, jobGroupId) ? 0 : d.nUncountedAlwaysRun);
      const cancelled = d.nCancelled + (cancelledBelow ? stopped : 0);
      e.n_jobs += d.nJobs;
      e.n_succeeded += d.nSucceeded;
      e.n_failed += d.nFailed;
      e.n_cancelled += cancelled;
      e.n_completed += d.nSucceeded + d.nFailed + cancelled;
      expected.set(key(runId, ancestorId), e);
      // An abort above an earlier cancellation counted the always_run jobs that one had left running.
      const aborted =
        d.nAborted +
        (abortedBy(runId, jobGroupId)
          ? d.nUncounted
          : abortOver(runId, jobGroupId) && cancelledBelow
            ? d.nUncountedAlwaysRun
            : 0);
      expectedAborted.set(key(runId, ancestorId), (expectedAborted.get(key(runId, ancestorId)) ?? 0) + aborted);
      // Uncounted always_run jobs stay open on every level but those an abort counted them on.
      const open = abortOver(runId, ancestorId) ? 0 : d.nUncountedAlwaysRun;
      expectedOpen.set(key(runId, ancestorId), (expectedOpen.get(key(runId, ancestorId)) ?? 0) + open);
    }
    const out: string[] = (await this.groups.cancelledFlagMismatches()).map(
      (r) =>
        `run ${r.runId} group ${r.jobGroupId}: counters say cancelled=${r.flag} but job_groups_cancelled ` +
        `${r.flag ? 'has no row' : 'has one'}`,
    );
    for (const c of await this.groups.allCounters()) {
      const shown = effectiveCounts(
        c,
        cancellations.get(c.runId)?.has(c.jobGroupId) ?? false,
        !abortOver(c.runId, c.jobGroupId),
      );
      const want = expected.get(key(c.runId, c.jobGroupId)) ?? {
        n_jobs: 0,
        n_completed: 0,
        n_succeeded: 0,
        n_failed: 0,
        n_cancelled: 0,
      };
      if (JSON.stringify(shown) !== JSON.stringify(want))
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: ` +
            `counters ${JSON.stringify(shown)} but jobs say ${JSON.stringify(want)}`,
        );
      const shownAborted =
        c.nAborted +
        (abortedBy(c.runId, c.jobGroupId)
          ? c.nJobs - c.nCompleted
          : abortOver(c.runId, c.jobGroupId)
            ? (c.nAlwaysRunOpen ?? 0)
            : 0);
      const wantAborted = expectedAborted.get(key(c.runId, c.jobGroupId)) ?? 0;
      if (shownAborted !== wantAborted)
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: counters say ${shownAborted} aborted but jobs say ${wantAborted}`,
        );
      const shownOpen = abortOver(c.runId, c.jobGroupId) ? 0 : (c.nAlwaysRunOpen ?? 0);
      const wantOpen = expectedOpen.get(key(c.runId, c.jobGroupId)) ?? 0;
      if (shownOpen !== wantOpen)
        out.push(
          `run ${c.runId} group ${c.jobGroupId}: counters say ${shownOpen} always_run jobs open but jobs say ` +
            `${wantOpen}`,
        );
    }
    return out;
  }

  /** Root counters of runs, with whether each has a cancelled group (see JobGroupsRepository.rootCountersOf). */
  rootCountersOf(
    runIds: string[],
    m?: EntityManager,
  ): Promise<Map<string, Counts & ActiveCounts & { anyCancelled: boolean }>> {
    return this.groups.rootCountersOf(runIds, m);
  }

  unfinishedJobs(m: EntityManager, runIds: string[]): Promise<number> {
    return this.groups.unfinishedJobs(m, runIds);
  }

  async rootCounts(runIds: string[]): Promise<Map<string, Counts & ActiveCounts>> {
    return this.groups.rootCounts(runIds);
  }

  /** Per run, the groups under a cancellation and the (earliest) cancellation that applies to each. */
  async effectiveCancellations(runIds: string[], m?: EntityManager): Promise<Map<string, Map<number, Cancellation>>> {
    const rows = await this.groups.effectiveCancellations(runIds, m);
    // The earliest abort over each group, where it is not the earliest cancellation itself (rare: read only then).
    const aborts = new Map<string, Cancellation>();
    if (rows.some((r) => !stopsAlwaysRun(r)))
      for (const a of await this.groups.effectiveCancellations(
        [...new Set(rows.map((r) => r.runId))],
        m,
        'aborted_by_user',
      ))
        aborts.set(`${a.runId}/${a.groupId}`, toCancellation(a));
    const out = new Map<string, Map<number, Cancellation>>();
    for (const r of rows) {
      let perRun = out.get(r.runId);
      if (!perRun) out.set(r.runId, (perRun = new Map()));
      perRun.set(r.groupId, { ...toCancellation(r), abort: aborts.get(`${r.runId}/${r.groupId}`) ?? null });
    }
    return out;
  }

  async get(runId: string, jobGroupId: number, m?: EntityManager): Promise<JobGroupView> {
    const group = await this.groups.findGroup(runId, jobGroupId, m);
    if (!group) throw notFound(`job group ${jobGroupId}`);
    const counts = required(
      await this.groups.countsOf(runId, jobGroupId, m),
      `the counters of job group ${jobGroupId}`,
    );
    const all = await this.groups.chainCancellations(runId, jobGroupId, m);
    const cancellation = all[0] ? { ...all[0], abort: all.find(stopsAlwaysRun) ?? null } : null;
    return toView(group, counts, cancellation);
  }

  async requireGroup(runId: string, jobGroupId: number): Promise<void> {
    if (!(await this.groups.findGroup(runId, jobGroupId))) throw notFound(`job group ${jobGroupId}`);
  }

  async children(runId: string, jobGroupId: number, limit: number, cursor?: string): Promise<Page<JobGroupView>> {
    await this.requireGroup(runId, jobGroupId);
    const after = cursor ? (decodeCursor(cursor, ['number'])[0] as number) : undefined;
    const rows = await this.groups.children(runId, jobGroupId, after, limit + 1);
    const page = toPage(
      rows,
      limit,
      (g) => [g.jobGroupId],
      (g) => g,
    );
    const counts = await this.groups.countersOfGroups(
      runId,
      page.items.map((g) => g.jobGroupId),
    );
    const cancellations = (await this.effectiveCancellations([runId])).get(runId) ?? new Map<number, Cancellation>();
    return {
      items: page.items.map((g) =>
        toView(
          g,
          required(counts.get(g.jobGroupId), `the counters of job group ${g.jobGroupId}`),
          cancellations.get(g.jobGroupId) ?? null,
        ),
      ),
      next_cursor: page.next_cursor,
    };
  }

  /** The group and all its ancestors, deepest first, unlocked (for billing, which adds usage to every level). */
  selfAndAncestorIds(m: EntityManager, runId: string, jobGroupId: number): Promise<number[]> {
    return this.groups.selfAndAncestorIds(m, runId, jobGroupId);
  }

  subtreeIds(runId: string, jobGroupId: number, m?: EntityManager): Promise<number[]> {
    return this.groups.subtreeIds(runId, jobGroupId, m);
  }
}

/** Counters as they were before `d` and `active` were added. */
function subtract(c: Counts & ActiveCounts, d: Partial<Counts>, active: ActiveDelta): Counts & ActiveCounts {
  return {
    nJobs: c.nJobs - (d.nJobs ?? 0),
    nCompleted: c.nCompleted - (d.nCompleted ?? 0),
    nSucceeded: c.nSucceeded - (d.nSucceeded ?? 0),
    nFailed: c.nFailed - (d.nFailed ?? 0),
    nCancelled: c.nCancelled - (d.nCancelled ?? 0),
    nAborted: c.nAborted - (d.nAborted ?? 0),
    nProvisioning: c.nProvisioning - (active.nProvisioning ?? 0),
    nRunning: c.nRunning - (active.nRunning ?? 0),
    nRetrying: c.nRetrying - (active.nRetrying ?? 0),
    nPending: c.nPending - (active.nPending ?? 0),
  };
}

function addTo(c: Counts, nJobs: number): Counts {
  return { ...pickCounts(c), nJobs: c.nJobs + nJobs };
}

const pickCounts = (c: Counts): Counts => ({
  nJobs: c.nJobs,
  nCompleted: c.nCompleted,
  nSucceeded: c.nSucceeded,
  nFailed: c.nFailed,
  nCancelled: c.nCancelled,
  nAborted: c.nAborted,
});

/**
 * The groups whose status (as `groupStatus` shows it) differs between two states of the same levels. A level that a
 * cancellation made in the same transaction covers (`cancelledAfter`, none before: callers only pass uncancelled
 * chains) and that shows as `cancelled` is left out: that cancellation's own record says it.
 */
export function statusChanges(
  levels: { jobGroupId: number; before: Counts; after: Counts; cancelledAfter?: boolean }[],
): GroupStatusChange[] {
  const out: GroupStatusChange[] = [];
  for (const l of levels) {
    const was = groupStatus(effectiveCounts(l.before, false), false);
    const cancelled = l.cancelledAfter ?? false;
    const now = groupStatus(effectiveCounts(l.after, cancelled), cancelled);
    if (now !== was && !(cancelled && now === 'cancelled')) out.push({ jobGroupId: l.jobGroupId, status: now });
  }
  return out;
}

function fieldError(field: string, message: string): DomainError {
  return new DomainError('VALIDATION_FAILED', `${field} ${message}`, [{ field, message }]);
}

/**
 * Counts as the API shows them. Under a cancellation, jobs not yet counted are cancelled: the stored counters of
 * groups below the cancelled one were (by design) not touched, so the difference is added here, at read.
 */
export function effectiveCounts(c: Counts, cancelled: boolean, spareAlwaysRun = true): GroupCounts {
  // always_run jobs not counted yet are not stopped by a cancellation (an abort stops them): they show as running.
  const pending = cancelled ? c.nJobs - c.nCompleted - (spareAlwaysRun ? (c.nAlwaysRunOpen ?? 0) : 0) : 0;
  return {
    n_jobs: c.nJobs,
    n_completed: c.nCompleted + pending,
    n_succeeded: c.nSucceeded,
    n_failed: c.nFailed,
    n_cancelled: c.nCancelled + pending,
  };
}

/** failure > cancelled > success > running. */
export function groupStatus(c: GroupCounts, cancelled: boolean): GroupStatus {
  if (c.n_failed > 0) return 'failure';
  if (cancelled || (c.n_completed === c.n_jobs && c.n_cancelled > 0)) return 'cancelled';
  if (c.n_completed === c.n_jobs) return 'success';
  return 'running';
}

function toView(g: JobGroup, counts: Counts, cancellation: Cancellation | null): JobGroupView {
  const eff = effectiveCounts(counts, cancellation !== null, abortOf(cancellation) === null);
  return {
    job_group_id: g.jobGroupId,
    parent_id: g.parentId,
    depth: g.depth,
    attributes: g.attributes,
    cancel_after_n_failures: g.cancelAfterNFailures,
    // A cancelled group with a running always_run job is still running.
    state: eff.n_completed === eff.n_jobs ? 'complete' : g.state,
    status: groupStatus(eff, cancellation !== null),
    cancellation: cancellation ? toCancellationView(cancellation) : null,
    counts: eff,
  };
}

function toCancellation(r: Cancellation): Cancellation {
  return { jobGroupId: r.jobGroupId, cancelledAt: r.cancelledAt, cancelledBy: r.cancelledBy, reason: r.reason };
}
