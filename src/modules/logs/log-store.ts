import type { EntityManager } from 'typeorm';
import type { LogStream } from './dto/log-streams';

/** The injection token of the LogStore the logs module uses (PostgresLogStore unless replaced). */
export const LOG_STORE = Symbol('LogStore');

/** What is stored of one submission's log: bytes of each stream (the next offsets) and chunks written. */
export interface LogLengths {
  stdout: number;
  stderr: number;
  chunks: number;
}

export interface NewChunk {
  submissionId: string;
  runId: string;
  stream: LogStream;
  /** The stream's stored length: chunks are only ever appended. */
  offset: number;
  /** The submission's chunk count: the order of writes, across both streams. */
  seq: number;
  data: Buffer;
}

/** A position in a submission's log: after the chunk numbered `seq`, which starts at `offset` of its stream. */
export interface LogPosition {
  seq: number;
  offset: number;
}

export interface ChunkQuery {
  submissionId: string;
  /** One stream (in byte order), or both (in the order they were written). */
  stream?: LogStream;
  after?: LogPosition;
  limit: number;
  /** Data is returned for chunks until this many bytes are reached (always for the first). */
  maxBytes: number;
}

export interface StoredChunk {
  seq: number;
  stream: LogStream;
  offset: number;
  length: number;
  at: Date;
  /** null: past the query's byte budget (the chunk exists; read it with the next page). */
  data: Buffer | null;
}

/**
 * Where logs live. The logs service holds the rules (offsets, overlaps, quota, who may write); a store keeps the
 * bytes and the order of writes. Writes run in the caller's database transaction (`m`), whose commit makes them
 * visible: a store outside PostgreSQL (files, an object store) would keep the bytes there and what orders them
 * (lengths, chunk numbers) here, in the same transaction. Deleting a run's logs joins the run deletion's transaction.
 */
export interface LogStore {
  /**
   * Taken by every writer before it checks that the run still exists; the run's deletion takes it exclusively
   * (deleteRun): a chunk committed either before the deletion (and is deleted with the run) or after it (and
   * sees the run deleted). Held until the transaction ends. Being the write's first statement, it also sets
   * whether the write's commit waits for its WAL flush (RUNPLANE_LOG_ASYNC_COMMIT).
   */
  lockRunForWrite(m: EntityManager, runId: string): Promise<void>;

  /** The submission's log, locked against other writers until the transaction ends (created empty if new). */
  lockSubmission(m: EntityManager, submissionId: string, runId: string): Promise<LogLengths>;

  /** Stored bytes [from, to) of a stream; `to` is at most the stream's stored length. */
  readRange(m: EntityManager, submissionId: string, stream: LogStream, from: number, to: number): Promise<Buffer>;

  /** Appends a chunk at the stream's end (after lockSubmission) and tells watchers once the transaction commits. */
  append(m: EntityManager, chunk: NewChunk): Promise<void>;

  /** Committed chunks after a position, in order; `limit` at most. */
  chunks(q: ChunkQuery): Promise<StoredChunk[]>;

  /** Removes every log of a run, in the caller's transaction (the run's deletion). */
  deleteRun(m: EntityManager, runId: string): Promise<void>;

  /**
   * Calls `wake` (soon, possibly more than once) when chunks of the submission are committed, on any instance
   * sharing the store. Returns the unsubscribe function.
   */
  watch(submissionId: string, wake: () => void): () => void;

  /** Tells this instance's watchers that a write of the submission committed (the caller saw its commit). */
  committed(submissionId: string): void;

  /**
   * Invariant 10 as stored: each stream's chunks tile it from byte 0 to its recorded length, with no gap or overlap,
   * and the chunk count is the recorded one. Lists at most `limit` problems.
   */
  mismatches(limit: number): Promise<string[]>;

  /** How often a follower should read again without being woken: notifications may be missed or unavailable. */
  readonly rereadMs: number;
}
