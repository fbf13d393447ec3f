import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { Client } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { Env } from '../../config/env';
import { preparedQuery } from '../../infra/database/prepared';
import type { LogStream } from './dto/log-streams';
import type { ChunkQuery, LogLengths, LogStore, NewChunk, StoredChunk } from './log-store';

/** Where a run's log writers and its deletion meet (pg_advisory_xact_lock's first key: 'rplg'). */
const RUN_LOGS_LOCK = 0x72706c67;
/** The NOTIFY channel of committed chunks; the payload is the submission id. */
const CHANNEL = 'runplane_logs';
/** A lost LISTEN connection is opened again after this long (while someone follows). */
const RECONNECT_MS = 1000;

type ChunkRow = Omit<StoredChunk, 'stream'> & { stream: string };

/**
 * Logs in PostgreSQL: `log_chunks` rows (bytea) and a `submission_logs` row per submission that serialises its
 * writers and numbers their chunks. Followers are woken by NOTIFY (sent in the writing transaction, delivered at
 * commit) through one LISTEN connection per instance, opened when someone first follows; on the embedded database
 * (one process, one session) by the writer itself once its transaction has committed.
 */
@Injectable()
export class PostgresLogStore implements LogStore, OnModuleDestroy {
  private readonly logger = new Logger(PostgresLogStore.name);
  private readonly watchers = new Map<string, Set<() => void>>();
  private listener: Client | undefined;
  private connecting = false;
  private closed = false;
  private reconnect: NodeJS.Timeout | undefined;

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly env: Env,
  ) {}

  /** Several instances may share the database: only a real server's NOTIFY reaches them all. */
  private get shared(): boolean {
    return !!this.env.DATABASE_URL && !this.env.DATABASE_EMBEDDED;
  }

  get rereadMs(): number {
    return this.listener ? 1000 : 500;
  }

  async lockRunForWrite(m: EntityManager, runId: string): Promise<void> {
    // The write's first statement also sets how it commits (RUNPLANE_LOG_ASYNC_COMMIT): no extra round trip.
    await preparedQuery(
      m,
      'logs_lock_run_shared',
      `SELECT pg_advisory_xact_lock_shared($1, hashtext($2)), set_config('synchronous_commit', $3, true)`,
      [RUN_LOGS_LOCK, runId, this.env.RUNPLANE_LOG_ASYNC_COMMIT ? 'off' : 'on'],
    );
  }

  async lockSubmission(m: EntityManager, submissionId: string, runId: string): Promise<LogLengths> {
    const lock = () =>
      preparedQuery<LogLengths>(
        m,
        'logs_lock_submission',
        `SELECT stdout_bytes::float8 AS stdout, stderr_bytes::float8 AS stderr, n_chunks AS chunks
           FROM submission_logs WHERE submission_id = $1 FOR UPDATE`,
        [submissionId],
      );
    const [found] = await lock();
    if (found) return found;
    await preparedQuery(
      m,
      'logs_create_submission',
      `INSERT INTO submission_logs (submission_id, run_id) VALUES ($1, $2) ON CONFLICT (submission_id) DO NOTHING`,
      [submissionId, runId],
    );
    const [created] = await lock();
    return created;
  }

  async readRange(
    m: EntityManager,
    submissionId: string,
    stream: LogStream,
    from: number,
    to: number,
  ): Promise<Buffer> {
    if (to <= from) return Buffer.alloc(0);
    // The chunk holding `from` (the last starting at or before it), then every chunk starting before `to`.
    const rows = await preparedQuery<{ offset: number; data: Buffer }>(
      m,
      'logs_read_range',
      `SELECT byte_offset::float8 AS "offset", data
         FROM log_chunks
        WHERE submission_id = $1 AND stream = $2 AND byte_offset < $4
          AND byte_offset >= (SELECT max(byte_offset) FROM log_chunks
                               WHERE submission_id = $1 AND stream = $2 AND byte_offset <= $3)
        ORDER BY byte_offset`,
      [submissionId, stream, from, to],
    );
    if (rows.length === 0) return Buffer.alloc(0);
    const joined = Buffer.concat(rows.map((r) => r.data));
    return joined.subarray(from - rows[0].offset, to - rows[0].offset);
  }

  async append(m: EntityManager, c: NewChunk): Promise<void> {
    await preparedQuery(
      m,
      'logs_append',
      `WITH chunk AS (
         INSERT INTO log_chunks (submission_id, stream, byte_offset, seq, run_id, length, data)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
       ), lengths AS (
         UPDATE submission_logs
            SET stdout_bytes = stdout_bytes + $8, stderr_bytes = stderr_bytes + $9, n_chunks = n_chunks + 1,
                updated_at = now()
          WHERE submission_id = $1
       )
       SELECT pg_notify($10, $1::text)`,
      [
        c.submissionId,
        c.stream,
        c.offset,
        c.seq,
        c.runId,
        c.data.length,
        c.data,
        c.stream === 'stdout' ? c.data.length : 0,
        c.stream === 'stderr' ? c.data.length : 0,
        CHANNEL,
      ],
    );
  }

  async chunks(q: ChunkQuery): Promise<StoredChunk[]> {
    // The page's positions first (index order, `limit` rows, no data), each with the bytes before it; then the data
    // of those within the byte budget, read by key. A chunk past the budget is listed without its data (detoasted
    // only when selected), which tells the caller there is more.
    const select = `SELECT c.seq, c.stream, c.byte_offset::float8 AS "offset", c.length, c.created_at AS at,
              CASE WHEN p.before < $4 THEN c.data END AS data`;
    const rows: ChunkRow[] = q.stream
      ? await this.dataSource.query(
          `${select}
             FROM (SELECT byte_offset, sum(length) OVER (ORDER BY byte_offset) - length AS before
                     FROM (SELECT byte_offset, length FROM log_chunks
                            WHERE submission_id = $1 AND stream = $5 AND byte_offset > $2
                            ORDER BY byte_offset LIMIT $3) w) p
             JOIN log_chunks c ON c.submission_id = $1 AND c.stream = $5 AND c.byte_offset = p.byte_offset
            ORDER BY p.byte_offset`,
          [q.submissionId, q.after?.offset ?? -1, q.limit, q.maxBytes, q.stream],
        )
      : await this.dataSource.query(
          `${select}
             FROM (SELECT seq, sum(length) OVER (ORDER BY seq) - length AS before
                     FROM (SELECT seq, length FROM log_chunks
                            WHERE submission_id = $1 AND seq > $2
                            ORDER BY seq LIMIT $3) w) p
             JOIN log_chunks c ON c.submission_id = $1 AND c.seq = p.seq
            ORDER BY p.seq`,
          [q.submissionId, q.after?.seq ?? -1, q.limit, q.maxBytes],
        );
    return rows as StoredChunk[];
  }

  async deleteRun(m: EntityManager, runId: string): Promise<void> {
    // Exclusive: waits for writers in flight (their chunks are then deleted here); later ones see the run deleted.
    await m.query(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, [RUN_LOGS_LOCK, runId]);
    await m.query(`DELETE FROM log_chunks WHERE run_id = $1`, [runId]);
    await m.query(`DELETE FROM submission_logs WHERE run_id = $1`, [runId]);
  }

  async mismatches(limit: number): Promise<string[]> {
    const rows: { problem: string }[] = await this.dataSource.query(
      `WITH c AS (
         SELECT submission_id, stream, byte_offset, coalesce(lag(byte_offset + length) OVER w, 0) AS expected
           FROM log_chunks WINDOW w AS (PARTITION BY submission_id, stream ORDER BY byte_offset)
       ), totals AS (
         SELECT submission_id, coalesce(sum(length) FILTER (WHERE stream = $1), 0) AS stdout,
                coalesce(sum(length) FILTER (WHERE stream = $2), 0) AS stderr, count(*) AS chunks, max(seq) AS last_seq
           FROM log_chunks GROUP BY submission_id
       )
       SELECT format('submission %s %s: a chunk at byte %s, where %s was expected', submission_id, stream,
                     byte_offset, expected) AS problem
         FROM c WHERE byte_offset <> expected
       UNION ALL
       SELECT format('submission %s: recorded %s/%s bytes (stdout/stderr) in %s chunks, stored %s/%s in %s '
                     '(last seq %s)',
                     l.submission_id, l.stdout_bytes, l.stderr_bytes, l.n_chunks, coalesce(t.stdout, 0),
                     coalesce(t.stderr, 0), coalesce(t.chunks, 0), t.last_seq)
         FROM submission_logs l LEFT JOIN totals t USING (submission_id)
        WHERE l.stdout_bytes <> coalesce(t.stdout, 0) OR l.stderr_bytes <> coalesce(t.stderr, 0)
           OR l.n_chunks <> coalesce(t.chunks, 0) OR t.last_seq <> l.n_chunks - 1
       UNION ALL
       SELECT format('submission %s: chunks without their submission_logs row', t.submission_id)
         FROM totals t WHERE NOT EXISTS (SELECT 1 FROM submission_logs l WHERE l.submission_id = t.submission_id)
       LIMIT $3`,
      ['stdout' satisfies LogStream, 'stderr' satisfies LogStream, limit],
    );
    return rows.map((r) => r.problem);
  }

  watch(submissionId: string, wake: () => void): () => void {
    let set = this.watchers.get(submissionId);
    if (!set) this.watchers.set(submissionId, (set = new Set()));
    set.add(wake);
    if (this.shared) void this.listen();
    return () => {
      set.delete(wake);
      if (set.size === 0 && this.watchers.get(submissionId) === set) this.watchers.delete(submissionId);
    };
  }

  committed(submissionId: string): void {
    // With a LISTEN connection the NOTIFY wakes every instance's followers, this one's included.
    if (!this.listener) this.wake(submissionId);
  }

  async onModuleDestroy(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnect);
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
  }

  private wake(submissionId: string): void {
    for (const wake of this.watchers.get(submissionId) ?? []) wake();
  }

  private wakeAll(): void {
    for (const set of this.watchers.values()) for (const wake of set) wake();
  }

  /** Opens the LISTEN connection if it is not open (or being opened); on loss, again while anyone follows. */
  private async listen(): Promise<void> {
    if (this.listener || this.connecting || this.closed) return;
    this.connecting = true;
    // LISTEN needs a session: DATABASE_SESSION_URL when DATABASE_URL is a transaction pooler.
    const client = new Client({
      connectionString: this.env.DATABASE_SESSION_URL ?? this.env.DATABASE_URL,
      application_name: 'runplane-logs-listen',
    });
    const lost = (err?: unknown) => {
      if (this.listener === client) this.listener = undefined;
      if (err) this.logger.warn({ err }, 'log notifications: connection lost; followers re-read meanwhile');
      void client.end().catch(() => undefined);
      this.scheduleReconnect();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (n) => {
      if (n.channel === CHANNEL && n.payload) this.wake(n.payload);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.listener = client;
      // Whatever was committed while no connection listened: every follower reads once more.
      this.wakeAll();
    } catch (err) {
      this.logger.warn({ err }, 'log notifications: cannot LISTEN; followers re-read meanwhile');
      client.removeAllListeners('end');
      await client.end().catch(() => undefined);
      this.scheduleReconnect();
    } finally {
      this.connecting = false;
    }
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnect || this.watchers.size === 0) return;
    this.reconnect = setTimeout(() => {
      this.reconnect = undefined;
      if (this.watchers.size > 0) void this.listen();
    }, RECONNECT_MS);
    this.reconnect.unref();
  }
}
