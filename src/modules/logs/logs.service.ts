import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { isUtf8 } from 'node:buffer';
import type { Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { decodeCursor, encodeCursor, Page } from '../../common/pagination/cursor';
import { Env } from '../../config/env';
import { retryReadOnce } from '../../infra/database/read-retry';
import { InvariantsRegistry } from '../../infra/invariants/invariants.registry';
import { TransactionRunner } from '../../infra/database/transaction.runner';
import { JobsService, type SubmissionState } from '../jobs/jobs.service';
import { isFinished } from '../lifecycle/vocabulary';
import { WorkerReportsService } from '../lifecycle/worker-reports.service';
import { RunAccessService } from '../runs/run-access.service';
import { RunCommandsService } from '../runs/run-commands.service';
import { chunkBytes, LogChunkAckView, LogChunkDto, LogChunkView, LogQueryDto, type LogStream } from './dto/logs.dto';
import { LOG_STORE, type LogPosition, type LogStore, type StoredChunk } from './log-store';

/** A page's data stops growing at this many bytes (its first chunk always comes whole). */
export const MAX_PAGE_BYTES = 4 * 1024 * 1024;
/** Chunks a follower reads at once. */
const FOLLOW_BATCH = 100;

/** What a follower receives: chunks with their resume position, then the end of the submission. */
export type FollowEvent =
  | { kind: 'chunk'; id: string; chunk: LogChunkView }
  | { kind: 'end'; submission_num: number; status: string; termination_reason: string | null };

/** The submission a reader asked for, checked for access. */
export interface LogTarget {
  submission: SubmissionState;
}

/** Before the first chunk. */
const START: LogPosition = { seq: -1, offset: -1 };

/**
 * Jobs' output: workers append chunks of stdout and stderr at byte offsets (idempotent by offset, gaps and
 * disagreeing overlaps refused, bounded per submission), users page through them or follow them. The bytes live in
 * a LogStore; the rules live here.
 */
@Injectable()
export class LogsService implements OnModuleInit, OnModuleDestroy {
  private readonly followers = new Set<AbortController>();

  constructor(
    private readonly tx: TransactionRunner,
    @Inject(LOG_STORE) private readonly store: LogStore,
    private readonly lifecycle: WorkerReportsService,
    private readonly runAccess: RunAccessService,
    private readonly runCommands: RunCommandsService,
    private readonly jobs: JobsService,
    private readonly env: Env,
    private readonly invariants: InvariantsRegistry,
  ) {}

  onModuleInit(): void {
    this.runCommands.onRunDeleted((m, runId) => this.store.deleteRun(m, runId));
    this.invariants.register({ name: 'log_chunks', check: (limit) => this.store.mismatches(limit) });
  }

  /** Ends every follow on this instance (shutdown): clients resume elsewhere with Last-Event-ID. */
  onModuleDestroy(): void {
    for (const follower of this.followers) follower.abort();
  }

  /**
   * A worker's chunk, in one transaction: refused whole (nothing stored) unless it continues or repeats what is
   * stored. Only what goes past the stored bytes is stored; a repeat is acknowledged as it was the first time.
   */
  async append(principal: Principal, submissionId: string, body: LogChunkDto): Promise<LogChunkAckView> {
    // The DTO has checked `data` against its encoding.
    const data = chunkBytes(body.data, body.encoding) ?? Buffer.alloc(0);
    return this.appendBytes(principal, submissionId, body.worker_id, body.stream, body.offset, data);
  }

  /** The same as `append`, for bytes as they are (the binary form of the route). */
  async appendBytes(
    principal: Principal,
    submissionId: string,
    workerId: string,
    stream: LogStream,
    offset: number,
    data: Buffer,
  ): Promise<LogChunkAckView> {
    const result = await this.tx.run(async (m) => {
      const s = await this.lifecycle.heldForOutput(
        m,
        principal,
        submissionId,
        workerId,
        this.env.RUNPLANE_LOG_GRACE_SECONDS,
      );
      await this.store.lockRunForWrite(m, s.runId);
      if (!(await this.runAccess.isLive(m, s.runId))) throw notFound(`submission ${submissionId}`);
      const lengths = await this.store.lockSubmission(m, s.id, s.runId);
      const accepted = lengths[stream];
      if (offset > accepted) throw gap(stream, offset, accepted);
      const overlapEnd = Math.min(offset + data.length, accepted);
      if (overlapEnd > offset) {
        const stored = await this.store.readRange(m, s.id, stream, offset, overlapEnd);
        const at = firstDifference(stored, data.subarray(0, overlapEnd - offset));
        if (at !== -1) throw mismatch(stream, offset, offset + at, accepted);
      }
      const tail = data.subarray(Math.max(0, accepted - offset));
      if (tail.length === 0) return { accepted, stored: 0 };
      const used = lengths.stdout + lengths.stderr;
      const quota = this.env.RUNPLANE_LOG_QUOTA_BYTES;
      if (used + tail.length > quota) throw quotaExceeded(stream, accepted, used, tail.length, quota);
      await this.store.append(m, {
        submissionId: s.id,
        runId: s.runId,
        stream,
        offset: accepted,
        seq: lengths.chunks,
        data: tail,
      });
      return { accepted: accepted + tail.length, stored: tail.length };
    });
    if (result.stored > 0) this.store.committed(submissionId);
    return { stream, accepted_length: result.accepted, stored_bytes: result.stored };
  }

  /** The submission a reader asks for: the run visible to the caller, the job in it, the attempt (default latest). */
  async target(
    principal: Principal,
    project: string,
    runId: string,
    jobId: string,
    submissionNum?: number,
  ): Promise<LogTarget> {
    return retryReadOnce(async () => {
      const { run } = await this.runAccess.requireRun(principal, project, runId);
      return { submission: await this.jobs.submissionOfJob(run.id, jobId, submissionNum) };
    });
  }

  /** Decodes a cursor (or Last-Event-ID); 400 INVALID_CURSOR when it is not one of this list. */
  position(cursor: string | undefined): LogPosition {
    if (cursor === undefined) return START;
    const [seq, offset] = decodeCursor(cursor, ['number', 'number']) as [number, number];
    return { seq, offset };
  }

  /**
   * One page after `after`. `next_cursor` is null only once the submission has finished and every chunk was read;
   * before that it is where to ask again (also when this page is empty), so a poller never loses its place.
   */
  async page(target: LogTarget, q: LogQueryDto, after: LogPosition): Promise<Page<LogChunkView>> {
    return retryReadOnce(async () => {
      // The status first: a submission seen finished has every chunk of its worker's run committed before the read.
      const state = await this.jobs.submissionState(target.submission.id);
      const { items, last, more } = await this.read(target.submission.id, q.stream, after, q.limit);
      const finished = !more && (!state || isFinished(state.status));
      return { items: items.map((i) => i.chunk), next_cursor: finished ? null : cursorOf(last ?? after) };
    });
  }

  /**
   * Chunks after `after` as they are committed, until the submission has finished (seen finished, then read once
   * more: everything committed before its final report is included), then its end. Stops early when `signal`
   * aborts (the client went away) or the application shuts down.
   */
  async *follow(
    target: LogTarget,
    stream: LogStream | undefined,
    after: LogPosition,
    signal: AbortSignal,
  ): AsyncGenerator<FollowEvent> {
    const controller = new AbortController();
    const stop = () => controller.abort();
    signal.addEventListener('abort', stop, { once: true });
    this.followers.add(controller);
    const waker = new Waker(controller.signal);
    const unwatch = this.store.watch(target.submission.id, waker.wake);
    try {
      let position = after;
      let finished: SubmissionState | undefined;
      while (!controller.signal.aborted) {
        const { items, last, more } = await this.read(target.submission.id, stream, position, FOLLOW_BATCH);
        for (const item of items) yield { kind: 'chunk', id: item.id, chunk: item.chunk };
        position = last ?? position;
        if (more) continue;
        if (finished) {
          yield {
            kind: 'end',
            submission_num: finished.submissionNum,
            status: finished.status,
            termination_reason: finished.terminationReason,
          };
          return;
        }
        // Seen finished: one more read picks up whatever was committed before the final report.
        const state = await this.jobs.submissionState(target.submission.id);
        if (!state || isFinished(state.status)) {
          finished = state ?? target.submission;
          continue;
        }
        await waker.wait(this.store.rereadMs);
      }
    } finally {
      unwatch();
      signal.removeEventListener('abort', stop);
      this.followers.delete(controller);
    }
  }

  private async read(
    submissionId: string,
    stream: LogStream | undefined,
    after: LogPosition,
    limit: number,
  ): Promise<{ items: { id: string; chunk: LogChunkView }[]; last: LogPosition | undefined; more: boolean }> {
    const rows = await this.store.chunks({ submissionId, stream, after, limit: limit + 1, maxBytes: MAX_PAGE_BYTES });
    const shown = rows.slice(0, limit).flatMap((r) => (r.data === null ? [] : [{ ...r, data: r.data }]));
    const last = shown.length
      ? { seq: shown[shown.length - 1].seq, offset: shown[shown.length - 1].offset }
      : undefined;
    return {
      items: shown.map((r) => ({ id: cursorOf({ seq: r.seq, offset: r.offset }), chunk: toView(r) })),
      last,
      more: rows.length > shown.length,
    };
  }
}

const cursorOf = (p: LogPosition) => encodeCursor([p.seq, p.offset]);

function toView(r: StoredChunk & { data: Buffer }): LogChunkView {
  const data = r.data;
  const text = isUtf8(data) && !data.includes(0);
  return {
    stream: r.stream,
    offset: r.offset,
    at: r.at.toISOString(),
    data: data.toString(text ? 'utf8' : 'base64'),
    encoding: text ? 'utf8' : 'base64',
  };
}

/** Index of the first differing byte of two equally long buffers, or -1. */
function firstDifference(a: Buffer, b: Buffer): number {
  if (a.length === b.length && a.equals(b)) return -1;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

const acceptedDetail = (field: string, message: string, accepted: number, extra: Record<string, number> = {}) => ({
  field,
  message,
  accepted_length: accepted,
  ...extra,
});

function gap(stream: LogStream, offset: number, accepted: number): DomainError {
  return new DomainError(
    'LOG_OFFSET_GAP',
    `offset ${offset} leaves a gap: ${accepted} bytes of ${stream} are accepted; send from offset ${accepted}`,
    [acceptedDetail('offset', `must be at most ${accepted} (the bytes of ${stream} accepted)`, accepted)],
  );
}

function mismatch(stream: LogStream, offset: number, at: number, accepted: number): DomainError {
  return new DomainError(
    'LOG_DATA_MISMATCH',
    `data sent at offset ${offset} differs from the ${stream} bytes already stored, at byte ${at}; nothing was stored`,
    [acceptedDetail('data', `differs from the stored bytes at byte ${at} of ${stream}`, accepted)],
  );
}

function quotaExceeded(stream: LogStream, accepted: number, used: number, adding: number, quota: number): DomainError {
  return new DomainError(
    'LOG_QUOTA_EXCEEDED',
    `the submission's log would exceed its quota of ${quota} bytes (${used} stored, ${adding} more); nothing was ` +
      `stored: end the job as failed/log_quota_exceeded`,
    [
      acceptedDetail('data', `exceeds the log quota of ${quota} bytes`, accepted, {
        quota_bytes: quota,
        used_bytes: used,
      }),
    ],
  );
}

/** A follower's sleep: until woken (a chunk was committed), a timeout, or the end of the follow. */
class Waker {
  private pending = false;
  private resolve: (() => void) | undefined;

  constructor(private readonly signal: AbortSignal) {
    signal.addEventListener('abort', () => this.resolve?.(), { once: true });
  }

  readonly wake = (): void => {
    this.pending = true;
    this.resolve?.();
  };

  async wait(ms: number): Promise<void> {
    if (!this.pending && !this.signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.resolve = undefined;
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.resolve = done;
      });
    }
    this.pending = false;
  }
}
