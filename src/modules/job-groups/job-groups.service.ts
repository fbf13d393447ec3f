import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { required } from '../../common/required';
import { ABORT_REASON, type Cancellation, cancelledJobOutcome } from '../lifecycle/outcomes';
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
import { JobGroupCounterReadsRepository } from './job-group-counter-reads.repository';
import { JobGroupCounterDeltasRepository } from './job-group-counter-deltas.repository';
import { JobGroupCountersRepository } from './job-group-counters.repository';
import type { ChainLevel, CountsDelta } from './job-group-rows';
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
    private readonly deltas: JobGroupCounterDeltasRepository,
    private readonly reads: JobGroupCounterReadsRepository,
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
    await this.deltas.addJobCounts(m, runId, counterToken(m), recursive, alwaysRun, pending);
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
  async withCancellations(m: EntityManager, runId: string, jobGroupId: number, levels: ChainLevel[]): Promise<Chain> {
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
    await this.deltas.addCounts(m, chain.runId, ids, counterToken(m), { nJobs: n, nAlwaysRunOpen: alwaysRun }, pending);
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
   * rows locked). Jobs not yet counted become cancelled: counted on the transaction's rows of every level. For
   * cancel, stopRoot and fail-fast (GroupCountingService).
   */
  async cancelLocked(
    m: EntityManager,
    runId: string,
    levels: ChainLevel[],
    by: string,
    reason: string,
  ): Promise<{ cancellation: Cancellation; counted: CountsDelta }> {
    const target = required(levels[0].exact, `the counters of group ${levels[0].jobGroupId}, locked whole`);
    const cancellation = await this.groups.insertCancellation(m, runId, levels[0].jobGroupId, by, reason);
    await this.deltas.markCancelled(m, runId, levels[0].jobGroupId);
    // always_run jobs go on running (and are counted when they finish) unless this is an abort, which stops them.
    const abort = cancelledJobOutcome(cancellation).status === 'aborted';
    const open = target.nAlwaysRunOpen ?? 0;
    const k = target.nJobs - target.nCompleted - (abort ? 0 : open);
    if (k === 0) return { cancellation, counted: {} };
    const counted = { nCompleted: k, nCancelled: k, nAborted: abort ? k : 0, nAlwaysRunOpen: abort ? -open : 0 };
    await this.deltas.addCounts(
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
    // Rows come by run, then group: each run's root (always asked) first.
    for (const r of await this.reads.settleInputs(m, asked, ABORT_REASON)) {
      if (r.jobGroupId === 0) out.set(r.runId, { root: { counts: r, stopReason: r.stopReason }, groups: [] });
      const run = required(out.get(r.runId), `the root group of run ${r.runId}`);
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
