import { BeforeApplicationShutdown, Injectable, Logger, OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { afterCommit } from '../../infra/database/after-commit';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { groupStatusEvents, type NewEvent, runStatusEvent } from '../events/event-types';
import { EventsService } from '../events/events.service';
import { GroupCountingService } from '../job-groups/group-counting.service';
import { JobGroupViewsService } from '../job-groups/job-group-views.service';
import {
  type ActiveDelta,
  announced,
  JobGroupsService,
  type RootState,
  unsettled,
} from '../job-groups/job-groups.service';
import { required } from '../../common/required';
import { type DerivedRunStatus, deriveRunStatus, FINISHED_RUN_STATUSES } from './dto/run-status';
import { RunsRepository } from './runs.repository';

/** How many times a failed settle is tried again before the loop is left to mend it. */
const SETTLE_RETRIES = 8;
/**
 * Under a stream of commits, the least time from one pass's start to the next unless a reader waits: commits in
 * between share one pass (its two reads are a round trip each, on a hot path that commits hundreds of times a
 * second), and a status shows that much later to other instances and the event feed, never to a reader on this one.
 * 50 rather than 10 ms: up to a fifth of the passes, and single-report completions 1.06× (ahead in 9 of 10 alternated
 * rounds; README "Statuses settle after commits").
 */
const SETTLE_GATHER_MS = 50;

/** Runs (each with groups of it) whose status a transaction may have moved. */
type Touched = Map<string, Set<number>>;

const touchedBy = new WeakMap<EntityManager, Touched>();

function merge(into: Touched, from: Touched): void {
  for (const [runId, groups] of from) {
    const set = into.get(runId);
    if (set) for (const g of groups) set.add(g);
    else into.set(runId, new Set(groups));
  }
}

/**
 * A run's status, derived from its root group's counters, and its groups' statuses (as their views show them),
 * recorded on the run and group rows with their events when they move.
 *
 * Counters are spread over token rows that concurrent transactions write without waiting for each other, so no
 * transaction sees the counts that the others are writing: a status is settled after the commits that move it.
 * Every transaction that changes counters names the run (and groups) it touched (`settleAfterCommit`); once it has
 * committed, a settle reads the counters as committed and, where the derived status differs from the recorded one,
 * records it under the run row's lock (reading again there), with its `run.status` or `group.status` event. The
 * last transaction to commit sees every commit before its settle, so the recorded status always ends where the
 * counters are. The request that committed answers without waiting for its settle (a worker never reads statuses);
 * reads of recorded statuses wait for the settles pending in their process (`settled`), so a client reading after
 * its own change sees it settled. Settles in one process share their reads: a pass serves every commit before it
 * began, and while commits keep coming passes start at most every SETTLE_GATHER_MS unless a reader waits for one
 * (`run.status` and `group.status` events then come after the job events of those commits). A process that dies
 * between a commit and its settle leaves a status behind until the `run_status_settle` loop (every 2 s, a slice of
 * unfinished runs) reaches the run; a settle that fails is tried again a few times first.
 */
@Injectable()
export class RunStatusService implements OnModuleInit, BeforeApplicationShutdown {
  private readonly logger = new Logger(RunStatusService.name);
  /** Work for the next pass, and who waits for it. */
  private queued: Touched = new Map();
  private waiting: (() => void)[] = [];
  /** The pass running, and the work it settles. */
  private current: { work: Touched; done: Promise<void> } | null = null;
  /** The next pass, when it waits for others' commits to gather; and when the last pass began. */
  private gathering: NodeJS.Timeout | null = null;
  private lastPassAt = 0;
  /** A reader waits for what is queued: the next pass starts as soon as the running one ends. */
  private readerWaits = false;
  /** The loop's place among unfinished runs (it walks them by id, a bounded slice per pass). */
  private loopAfter = '00000000-0000-0000-0000-000000000000';

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly tx: TransactionRunner,
    private readonly runs: RunsRepository,
    private readonly groups: JobGroupsService,
    private readonly counting: GroupCountingService,
    private readonly groupViews: JobGroupViewsService,
    private readonly events: EventsService,
    private readonly loops: BackgroundLoopsService,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'run_status_settle', everyMs: 2000, pass: () => this.settleUnfinished(500) });
  }

  /** What commits asked to settle is settled before the database connections close. */
  async beforeApplicationShutdown(): Promise<void> {
    await this.settled();
  }

  /**
   * Settles the run's status, and the given groups' with their ancestors', once `m`'s transaction has committed
   * (in the background: the request answers without waiting; readers wait through `settled`).
   */
  settleAfterCommit(m: EntityManager, runId: string, groupIds: readonly number[] = []): void {
    let touched = touchedBy.get(m);
    if (!touched) {
      const mine: Touched = new Map();
      touchedBy.set(m, (touched = mine));
      afterCommit(m, () => void this.settle(mine));
    }
    merge(touched, new Map([[runId, new Set(groupIds)]]));
  }

  /**
   * Resolves once no settle pending in this process concerns these runs (any run, without `runIds`): what reads of
   * recorded statuses wait for, so a client reading after its own change (on this instance) sees it settled. At
   * most the pass running and the next one.
   */
  async settled(runIds?: readonly string[]): Promise<void> {
    const concerns = (work: Touched) => (runIds === undefined ? work.size > 0 : runIds.some((id) => work.has(id)));
    const waits: Promise<void>[] = [];
    if (this.current && concerns(this.current.work)) waits.push(this.current.done);
    if (concerns(this.queued)) {
      waits.push(new Promise<void>((resolve) => this.waiting.push(resolve)));
      this.readerWaits = true;
      this.schedule(true);
    }
    await Promise.all(waits);
  }

  /** Moves the run's active counts (jobs provisioning, running, queued as a retry) and settles its status after. */
  async moveActive(m: EntityManager, runId: string, d: ActiveDelta): Promise<void> {
    await this.counting.moveActive(m, runId, d);
    this.settleAfterCommit(m, runId);
  }

  /**
   * Settles runs and groups as committed now: resolves once a pass that began after this call has settled them
   * (a pass already running may have read before the caller's commit). Never rejects: a pass that fails is logged,
   * and the loop settles the run later.
   */
  settle(work: Touched): Promise<void> {
    merge(this.queued, work);
    const done = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.schedule(false);
    return done;
  }

  /**
   * Starts the next pass: at once when a reader waits (`now`) or the last one began SETTLE_GATHER_MS ago or more,
   * else when it has. (Waiting only after a pass that commits had overlapped started one pass a commit on the
   * single-report path, whose transactions take longer than a pass: a third of its statements.)
   */
  private schedule(now: boolean): void {
    if (this.current || this.queued.size === 0) return; // the running pass schedules the next when it ends
    const wait = now ? 0 : this.lastPassAt + SETTLE_GATHER_MS - Date.now();
    if (wait <= 0) {
      if (this.gathering) clearTimeout(this.gathering);
      this.gathering = null;
      void this.next();
    } else if (!this.gathering) {
      this.gathering = setTimeout(() => {
        this.gathering = null;
        this.schedule(true);
      }, wait);
    }
  }

  /** One pass over what is queued; a reader that came meanwhile has the next one start at once. */
  private async next(): Promise<void> {
    const work = this.queued;
    const waiting = this.waiting;
    this.queued = new Map();
    this.waiting = [];
    this.readerWaits = false;
    this.lastPassAt = Date.now();
    const done = this.pass(work).then(
      () => undefined,
      (err: unknown) => this.retryLater(work, err),
    );
    this.current = { work, done };
    await done;
    this.current = null;
    for (const resolve of waiting) resolve();
    this.schedule(this.readerWaits);
  }

  /**
   * A pass that failed (the database away a moment, a session terminated) is tried again a few times, 0.1 s, 0.2 s,
   * ... apart; its requests have their answers already (their commits stand). Past that, the loop mends the runs.
   */
  private retryLater(work: Touched, err: unknown, attempt = 1): void {
    if (attempt > SETTLE_RETRIES) {
      this.logger.warn({ err }, 'settling run statuses failed; the run_status_settle loop will mend them');
      return;
    }
    const timer = setTimeout(() => {
      this.pass(work).catch((again: unknown) => this.retryLater(work, again, attempt + 1));
    }, 100 * attempt);
    timer.unref();
  }

  /** Reads what moved (no lock; two statements for the whole pass), then settles each such run in a transaction. */
  private async pass(work: Touched): Promise<number> {
    const m = this.dataSource.manager;
    const inputs = await this.groups.settleInputs(m, work);
    const stored = new Map((await this.runs.statusesOf(m, [...inputs.keys()])).map((r) => [r.id, r]));
    let settled = 0;
    for (const runId of [...inputs.keys()].sort()) {
      const { root, groups } = required(inputs.get(runId), `the settle inputs of run ${runId}`);
      const run = stored.get(runId);
      if (!run || (sameStatus(derive(root), run) && unsettled(groups).length === 0)) continue;
      await this.tx.run((t) => this.settleRun(t, runId, work.get(runId) ?? new Set()));
      settled++;
    }
    return settled;
  }

  /** Under the run row's lock, the run's and the groups' statuses as derived now, recorded where they moved. */
  private async settleRun(m: EntityManager, runId: string, groupIds: ReadonlySet<number>): Promise<void> {
    const run = await this.runs.lockRun(m, runId);
    const inputs = (await this.groups.settleInputs(m, new Map([[runId, groupIds]]))).get(runId);
    if (!run || !inputs) return;
    const derived = derive(inputs.root);
    const groups = unsettled(inputs.groups);
    const events: NewEvent[] = groupStatusEvents(run.projectId, runId, announced(groups));
    await this.groups.recordSettled(m, runId, groups);
    if (!sameStatus(derived, run)) {
      await this.runs.setStatus(m, runId, derived, FINISHED_RUN_STATUSES.includes(derived.status));
      if (derived.status !== run.status)
        events.push(runStatusEvent(run.projectId, runId, derived.status, derived.terminationReason));
    }
    await this.events.record(m, events);
  }

  /** One pass of the loop: the next slice of unfinished runs (by id, wrapping around), settled where they moved. */
  async settleUnfinished(limit: number): Promise<number> {
    const ids = await this.runs.unfinishedRunIdsAfter(this.loopAfter, limit);
    this.loopAfter = ids.length < limit ? '00000000-0000-0000-0000-000000000000' : ids[ids.length - 1];
    if (ids.length === 0) return 0;
    return this.pass(new Map(ids.map((id) => [id, new Set<number>()])));
  }

  /** Invariants 1 and 6 for runs: active counts match the jobs, status is what the counters derive, root = run. */
  async runMismatches(
    active: { runId: string; nProvisioning: number; nRunning: number; nRetrying: number; nPending: number }[],
  ): Promise<string[]> {
    await this.settled();
    const byRun = new Map(active.map((a) => [a.runId, a]));
    const runs = await this.runs.allRuns();
    const roots = await this.groupViews.rootCounts(runs.map((r) => r.id));
    const stops = await this.groupViews.effectiveCancellations(runs.map((r) => r.id));
    const out: string[] = [];
    for (const r of runs) {
      const a = byRun.get(r.id) ?? { nProvisioning: 0, nRunning: 0, nRetrying: 0, nPending: 0 };
      const root = roots.get(r.id);
      if (!root) {
        out.push(`run ${r.id}: has no job group 0`);
        continue;
      }
      const counted = [root.nProvisioning, root.nRunning, root.nRetrying, root.nPending];
      const actual = [a.nProvisioning, a.nRunning, a.nRetrying, a.nPending];
      if (counted.some((n, i) => n !== actual[i])) {
        out.push(
          `run ${r.id}: active and pending counts ${JSON.stringify(counted)} but jobs say ${JSON.stringify(actual)}`,
        );
      }
      const rootStop = stops.get(r.id)?.get(0);
      const derived = deriveRunStatus({
        ...root,
        ...a,
        stopReason: rootStop && rootStop.jobGroupId === 0 ? rootStop.reason : null,
      });
      if (
        derived.status !== r.status ||
        derived.statusMessage !== r.statusMessage ||
        derived.terminationReason !== r.terminationReason
      ) {
        out.push(
          `run ${r.id}: status ${r.status}/${r.statusMessage}/${r.terminationReason} but counters derive ` +
            `${derived.status}/${derived.statusMessage}/${derived.terminationReason}`,
        );
      }
    }
    return out;
  }
}

const derive = (root: RootState): DerivedRunStatus => deriveRunStatus({ ...root.counts, stopReason: root.stopReason });

const sameStatus = (a: DerivedRunStatus, b: DerivedRunStatus) =>
  a.status === b.status && a.statusMessage === b.statusMessage && a.terminationReason === b.terminationReason;
