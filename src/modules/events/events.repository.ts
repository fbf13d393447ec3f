import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { preparedQuery } from '../../infra/database/prepared';
import type { StatementRider } from '../../infra/database/rider';
import type { Position } from './event-cursor';
import type { NewEvent } from './event-types';

/** The channel `record` notifies on commit; the payload is the comma list of the projects written ('' = any). */
export const EVENTS_CHANNEL = 'runplane_events';

/** Notifications carry at most this many project ids (a payload must stay under 8000 bytes); more: wake everyone. */
const MAX_NOTIFIED_PROJECTS = 100;

export interface StoredEvent {
  seq: string;
  txId: string;
  at: Date;
  type: string;
  projectId: string;
  runId: string | null;
  jobGroupId: number | null;
  jobId: string | null;
  submissionNum: number | null;
  status: string | null;
  reason: string | null;
  actor: string | null;
}

export interface EventFilter {
  projectId: string;
  runId?: string;
  /** undefined = every type. */
  types?: readonly string[];
}

export interface ReadResult {
  events: StoredEvent[];
  /** xmin of the snapshot the read saw: every event below it was readable, none at or above it was read. */
  horizon: string;
  /** Events matching the filter exist after `after` but at or above the horizon (committed, held back). */
  heldBack: boolean;
}

/**
 * The INSERT of `insert`, its nine array parameters numbered from `first`. tx_id is computed from the statement's
 * snapshot (see insert), so as a CTE of another statement it is taken when that statement begins.
 */
function insertEvents(first: number): string {
  const p = (i: number) => `$${first + i}`;
  return `INSERT INTO events (tx_id, type, project_id, run_id, job_group_id, job_id, submission_num, status, reason,
                              actor)
     SELECT key.tx_id, e.*
       FROM (SELECT GREATEST(pg_current_xact_id(),
                             (pg_snapshot_xmax(pg_current_snapshot())::text::int8 - 1)::text::xid8) AS tx_id) key,
            unnest(${p(0)}::varchar[], ${p(1)}::uuid[], ${p(2)}::uuid[], ${p(3)}::int[], ${p(4)}::uuid[],
                   ${p(5)}::int[], ${p(6)}::varchar[], ${p(7)}::varchar[], ${p(8)}::varchar[]) AS e`;
}

function eventParams(events: readonly NewEvent[]): unknown[] {
  return [
    events.map((e) => e.type),
    events.map((e) => e.projectId),
    events.map((e) => e.runId ?? null),
    events.map((e) => e.jobGroupId ?? null),
    events.map((e) => e.jobId ?? null),
    events.map((e) => e.submissionNum ?? null),
    events.map((e) => e.status ?? null),
    events.map((e) => e.reason ?? null),
    events.map((e) => e.by ?? null),
  ];
}

const COLUMNS = `e.seq::text AS seq, e.tx_id::text AS "txId", e.at, e.type, e.project_id AS "projectId",
  e.run_id AS "runId", e.job_group_id AS "jobGroupId", e.job_id AS "jobId", e.submission_num AS "submissionNum",
  e.status, e.reason, e.actor`;

@Injectable()
export class EventsRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * Appends events in the caller's transaction: one statement for any number of them (arrays through unnest). It
   * notifies nobody: a NOTIFY in the writing transaction would take PostgreSQL's notification-queue lock through
   * that transaction's commit and flush, serialising every commit that writes events (see `notify`).
   *
   * tx_id, the feed's first key (see read), is the transaction's id, raised to the newest transaction id already
   * ended when this statement began (its snapshot's xmax − 1) when that is larger:
   * - Safe: it is at least the transaction's own id, so while the transaction runs, and for every reader that read
   *   before it wrote, its events are at or above the horizon (xmin).
   * - Live: once the transaction has ended, both terms are ids of ended transactions, so its events become readable
   *   as soon as the transactions below them have ended (raised to xmax itself, an id not yet given out, they would
   *   wait for some later transaction to end: on a quiet database, for ever).
   * - In commit order where it matters: the transaction's own id alone was taken at its first write (a lifecycle
   *   transaction's first row lock), and a transaction that then waited for another's lock (a run's root counters)
   *   and committed after it would have come first in the feed: a run could be seen `done`, then `running`. Raised
   *   to an id that ended after the other one did, it comes after it (a tie goes by seq, taken later too). So an
   *   event written after another event's transaction committed always follows it in the feed (in READ COMMITTED,
   *   where each statement takes a fresh snapshot: every writer here).
   */
  async insert(m: EntityManager, events: readonly NewEvent[]): Promise<void> {
    await preparedQuery(m, 'events_record', insertEvents(1), eventParams(events));
  }

  /** The same INSERT as `insert`, to be run as a CTE of another module's statement (see StatementRider). */
  rider(events: readonly NewEvent[]): StatementRider {
    return { name: 'events_record', cte: insertEvents, params: eventParams(events) };
  }

  /**
   * Wakes the followers of `projectIds` on every instance (one notification on EVENTS_CHANNEL; '' = any), in its own
   * short transaction after the writers committed: the notification-queue lock is held only by this statement.
   */
  async notify(projectIds: readonly string[]): Promise<void> {
    const payload = projectIds.length > MAX_NOTIFIED_PROJECTS ? '' : projectIds.join(',');
    await this.dataSource.query('SELECT pg_notify($1, $2)', [EVENTS_CHANNEL, payload]);
  }

  /**
   * Up to `limit` events matching `f` after `after`, in the feed's order, and the read's horizon.
   *
   * Why not simply `seq > last seq`: seq is taken when a row is inserted, but rows become visible when their
   * transaction commits, and concurrent transactions commit out of seq order. A reader that returned seq 10 could
   * later find a seq 9 committed after it, and a cursor past 10 would skip it for ever. So the feed is ordered by
   * (tx_id, seq), and a read returns only events whose tx_id is below the xmin of its own snapshot
   * (pg_snapshot_xmin(pg_current_snapshot()), taken in this same statement): tx_id is at least the writing
   * transaction's id (see insert), so every such event's transaction has ended: it is either visible now or never
   * will be. And no event can later appear below that xmin: a transaction still running has an id at or above it,
   * and one that has no id yet will get one at or above this snapshot's xmax.
   *
   * The price: an event becomes readable only once every transaction whose id is below its tx_id has ended (on any
   * database of the server, writing events or not). A long transaction delays the feed behind it; it never
   * reorders it. `heldBack` tells a follower that committed events wait behind such a transaction, so it looks again
   * soon rather than at its next periodic read.
   */
  async read(f: EventFilter, after: Position, limit: number): Promise<ReadResult> {
    const params: unknown[] = [f.projectId, after.txId, after.seq];
    const filters = [`e.project_id = $1`];
    if (f.runId !== undefined) filters.push(`e.run_id = $${params.push(f.runId)}`);
    if (f.types !== undefined) filters.push(`e.type = ANY($${params.push(f.types)}::varchar[])`);
    filters.push(`(e.tx_id, e.seq) > ($2::xid8, $3::bigint)`);
    const where = filters.join(' AND ');
    const rows: (StoredEvent & { horizon: string; heldBack: boolean })[] = await this.dataSource.query(
      `WITH h AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
            hb AS (SELECT EXISTS (SELECT 1 FROM events e, h WHERE ${where} AND e.tx_id >= h.xmin) AS held_back)
       SELECT h.xmin::text AS horizon, hb.held_back AS "heldBack", page.*
         FROM h CROSS JOIN hb
         LEFT JOIN LATERAL (
           SELECT ${COLUMNS} FROM events e
            WHERE ${where} AND e.tx_id < h.xmin
            ORDER BY e.tx_id, e.seq
            LIMIT $${params.push(limit)}
         ) page ON true`,
      params,
    );
    const { horizon, heldBack } = rows[0];
    // No event matched: the one row is the horizon's, its event columns null.
    const events: StoredEvent[] =
      rows[0].seq === null
        ? []
        : rows.map((r) => ({
            seq: r.seq,
            txId: r.txId,
            at: r.at,
            type: r.type,
            projectId: r.projectId,
            runId: r.runId,
            jobGroupId: r.jobGroupId,
            jobId: r.jobId,
            submissionNum: r.submissionNum,
            status: r.status,
            reason: r.reason,
            actor: r.actor,
          }));
    return { events, horizon, heldBack };
  }

  /** The horizon now: the xmin of a fresh snapshot (see read). */
  async horizon(): Promise<string> {
    const [row] = await this.dataSource.query(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`);
    return row.xmin;
  }

  /**
   * Removes up to `limit` of the oldest events (by seq: the table's head) written before now − `retentionHours` and
   * before `floor` (when given). Reading the head through the primary key keeps a pass bounded even when nothing is
   * old enough; an event that the head's order puts behind a younger one (its transaction began earlier but wrote
   * later) simply waits for a later pass. Uses the database's clock.
   */
  async purge(retentionHours: number, floor: Date | null, limit: number): Promise<number> {
    const [row] = await this.dataSource.query(
      `WITH head AS (SELECT seq FROM events ORDER BY seq LIMIT $3),
            gone AS (
              DELETE FROM events e USING head h
               WHERE e.seq = h.seq AND e.at < LEAST(now() - make_interval(hours => $1), $2::timestamptz)
           RETURNING 1
            )
       SELECT count(*)::int AS n FROM gone`,
      [retentionHours, floor, limit],
    );
    return row.n;
  }
}
