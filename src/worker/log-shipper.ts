import { type ApiError, createRunplaneClient, type RunplaneClient } from '../client';

import { workerFetch } from './http-fetch';
import type { LogSink, OutputStream } from './log-sink';

export type LogStreamName = OutputStream;

export interface LogShipperOptions {
  /** The server, e.g. http://127.0.0.1:3000. */
  url: string;
  /** The worker's service-account token. */
  token: string;
  submissionId: string;
  workerId: string;
  /** Send as soon as this many bytes of a stream wait (default 64 KiB). */
  flushBytes?: number;
  /** Send what waits at least this often (default 200 ms). */
  flushIntervalMs?: number;
  /**
   * The biggest chunk sent (default 1 MiB, the server's limit): what piles up while a chunk is in flight goes in
   * the next one, so a job printing fast pays the per-request cost (HTTP, a transaction) once per MiB.
   */
  maxChunkBytes?: number;
  /** Unsent bytes of a stream past which whenWritable() asks the writer to wait (default 4 MiB). */
  highWaterBytes?: number;
  /**
   * Unsent bytes held per stream from a writer that ignores whenWritable(); more output is dropped (default
   * 64 MiB).
   */
  maxBufferedBytes?: number;
  /** First and longest pause between tries of a chunk the network or a busy server refused (100 ms, 5 s). */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** One request's time limit (default 30 s). */
  requestTimeoutMs?: number;
  /** How long close() keeps trying to deliver what is left (default 60 s); then the rest is given up. */
  closeTimeoutMs?: number;
  /** Another fetch (tests, proxies); the default is the worker's (http-fetch.ts). */
  fetch?: (input: Request) => Promise<Response>;
  /** Told about output that could not be delivered and why (default: nothing). */
  onWarning?: (message: string) => void;
}

const STREAMS: readonly LogStreamName[] = ['stdout', 'stderr'];

/** One stream's bytes not yet accepted by the server, from `base` (what the server has accepted) on. */
class Pending {
  base = 0;
  parts: Buffer[] = [];
  bytes = 0;
  sending: Promise<void> | undefined;
  timer: NodeJS.Timeout | undefined;
  /** 409s in a row that moved nothing: a server and a shipper that disagree for good. */
  fruitless = 0;
  /** A writer waiting for room (whenWritable), told once the backlog is down to half the high-water mark. */
  room: { promise: Promise<void>; resolve: () => void } | undefined;

  /** Tells a waiting writer there is room again. */
  release(): void {
    this.room?.resolve();
    this.room = undefined;
  }

  push(b: Buffer): void {
    this.parts.push(b);
    this.bytes += b.length;
  }

  /** Up to `max` bytes from the start, without removing them. */
  peek(max: number): Buffer {
    if (this.parts.length === 1 || this.parts[0].length >= max) return this.parts[0].subarray(0, max);
    const take: Buffer[] = [];
    let n = 0;
    for (const p of this.parts) {
      if (n >= max) break;
      take.push(p.subarray(0, max - n));
      n += Math.min(p.length, max - n);
    }
    return Buffer.concat(take, n);
  }

  /** Drops `n` bytes from the start (the server has them). */
  drop(n: number): void {
    this.bytes -= n;
    while (n > 0 && this.parts.length > 0) {
      const first = this.parts[0];
      if (first.length <= n) {
        n -= first.length;
        this.parts.shift();
      } else {
        this.parts[0] = first.subarray(n);
        n = 0;
      }
    }
    if (this.parts.length === 0) this.bytes = 0;
  }
}

/**
 * Ships one submission's stdout and stderr to the server in chunks with byte offsets: batched by size (64 KiB) and
 * time (200 ms), one request in flight per stream so each stream arrives in order; what piles up meanwhile goes in
 * the next chunk (up to 1 MiB), and past 4 MiB waiting, whenWritable() asks the writer to wait. A chunk the network
 * lost (or a busy server refused) is sent again with the same offset (the server stores it once); a 409 tells how
 * much the server holds and the shipper carries on from there; a 413 `LOG_QUOTA_EXCEEDED` stops it and sets
 * `quotaExceeded` (and resolves `quotaReached`): the executor then ends the job as failed/log_quota_exceeded.
 * `close()` delivers what is left. Chunks are cut on UTF-8 character boundaries where the text allows, so that pages
 * read back as text.
 */
export class LogShipper implements LogSink {
  private readonly api: RunplaneClient;
  private readonly streams: Record<LogStreamName, Pending> = { stdout: new Pending(), stderr: new Pending() };
  private readonly abort = new AbortController();
  private readonly o: Required<Omit<LogShipperOptions, 'fetch' | 'onWarning'>> &
    Pick<LogShipperOptions, 'fetch' | 'onWarning'>;
  private closing = false;
  private stopped = false;
  private quota = false;
  private signalQuota!: () => void;
  private droppedBytes = 0;
  private stopReason: string | undefined;

  /** Resolves once the server refused output past the submission's log quota (never, otherwise). */
  readonly quotaReached: Promise<void>;

  constructor(options: LogShipperOptions) {
    this.o = {
      flushBytes: 64 * 1024,
      flushIntervalMs: 200,
      maxChunkBytes: 1024 * 1024,
      highWaterBytes: 4 * 1024 * 1024,
      maxBufferedBytes: 64 * 1024 * 1024,
      retryMinMs: 100,
      retryMaxMs: 5000,
      requestTimeoutMs: 30_000,
      closeTimeoutMs: 60_000,
      ...options,
    };
    this.api = createRunplaneClient(options.url, options.token, { fetch: options.fetch ?? workerFetch });
    this.quotaReached = new Promise((resolve) => (this.signalQuota = resolve));
  }

  get quotaExceeded(): boolean {
    return this.quota;
  }

  /** Why shipping stopped before everything was delivered (quota, the submission no longer held...), if it did. */
  get failure(): string | undefined {
    return this.stopReason;
  }

  /** Bytes accepted by the server, per stream. */
  get accepted(): Record<LogStreamName, number> {
    return { stdout: this.streams.stdout.base, stderr: this.streams.stderr.base };
  }

  /** Output given up on: written after a stop or close, past the buffer limit, or left when close() timed out. */
  get dropped(): number {
    return this.droppedBytes;
  }

  write(stream: LogStreamName, chunk: Buffer): void {
    if (chunk.length === 0) return;
    const s = this.streams[stream];
    if (this.stopped || this.closing) {
      this.droppedBytes += chunk.length;
      return;
    }
    if (s.bytes + chunk.length > this.o.maxBufferedBytes) {
      if (this.droppedBytes === 0) this.warn(`${stream}: ${s.bytes} bytes wait unsent; dropping further output`);
      this.droppedBytes += chunk.length;
      return;
    }
    // Copied: the caller may reuse its buffer.
    s.push(Buffer.from(chunk));
    if (s.bytes >= this.o.flushBytes) this.kick(stream);
    else s.timer ??= setTimeout(() => this.kick(stream), this.o.flushIntervalMs);
  }

  whenWritable(stream: LogStreamName): Promise<void> | undefined {
    const s = this.streams[stream];
    if (this.stopped || this.closing || s.bytes < this.o.highWaterBytes) return undefined;
    if (!s.room) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      s.room = { promise, resolve };
    }
    return s.room.promise;
  }

  /** Delivers what is left (within closeTimeoutMs), then stops. Later writes are dropped. */
  async close(): Promise<void> {
    this.closing = true;
    for (const s of Object.values(this.streams)) s.release();
    const delivered = Promise.all(STREAMS.map((name) => this.kick(name)));
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>(
      (resolve) => (timer = setTimeout(() => resolve(true), this.o.closeTimeoutMs)),
    );
    const late = await Promise.race([delivered.then(() => false), timedOut]);
    clearTimeout(timer);
    if (late) {
      const left = STREAMS.reduce((n, name) => n + this.streams[name].bytes, 0);
      this.stop(`close timed out with ${left} bytes undelivered`);
      await delivered;
    }
    this.stopped = true;
  }

  /** Starts sending a stream's waiting bytes unless a send is in flight; resolves when that stream is idle. */
  private kick(name: LogStreamName): Promise<void> {
    const s = this.streams[name];
    clearTimeout(s.timer);
    s.timer = undefined;
    if (!s.sending)
      s.sending = this.pump(name, s).finally(() => {
        s.sending = undefined;
      });
    return this.closing
      ? s.sending.then(() => (s.bytes > 0 && !this.stopped ? this.kick(name) : undefined))
      : s.sending;
  }

  /** Sends chunks while a full chunk waits (or closing); a smaller rest waits for the timer. */
  private async pump(name: LogStreamName, s: Pending): Promise<void> {
    let first = true;
    let pause = this.o.retryMinMs;
    while (!this.stopped && s.bytes > 0 && (first || this.closing || s.bytes >= this.o.flushBytes)) {
      first = false;
      const outcome = await this.send(name, s);
      if (outcome === 'retry') {
        await this.sleep(pause);
        pause = Math.min(pause * 2, this.o.retryMaxMs);
        first = true; // the same bytes still wait: try again whatever their size
      } else if (typeof outcome === 'number') {
        await this.sleep(outcome);
        first = true;
      } else pause = this.o.retryMinMs;
    }
    if (!this.stopped && s.bytes > 0 && !this.closing)
      s.timer ??= setTimeout(() => this.kick(name), this.o.flushIntervalMs);
  }

  /** One request: 'sent' (progress, or a 409 resync), 'retry' (try again later), or ms to wait (Retry-After). */
  private async send(name: LogStreamName, s: Pending): Promise<'sent' | 'retry' | number> {
    const chunk = utf8Prefix(s.peek(this.o.maxChunkBytes), s.bytes > this.o.maxChunkBytes || !this.closing);
    const offset = s.base;
    let res: Awaited<ReturnType<typeof this.post>>;
    try {
      res = await this.post(name, offset, chunk);
    } catch {
      return this.stopped ? 'sent' : 'retry'; // network trouble, a timeout: the same offset again
    }
    const { status, body } = res;
    if (status === 200) {
      const accepted = (body as { accepted_length: number }).accepted_length;
      this.advance(s, accepted);
      s.fruitless = 0;
      return 'sent';
    }
    const error = body as Partial<ApiError> | undefined;
    if (status === 413 && error?.code === 'LOG_QUOTA_EXCEEDED') {
      // The chunk was refused whole: what still fits goes in one last chunk, so the log keeps its quota's worth.
      const room = quotaRoom(error);
      if (room > 0 && room < chunk.length) {
        const last = await this.post(name, offset, utf8Prefix(chunk.subarray(0, room), true)).catch(() => undefined);
        if (last?.status === 200) this.advance(s, (last.body as { accepted_length: number }).accepted_length);
      }
      this.quota = true;
      this.stop(`log quota exceeded: ${error.message ?? ''}`);
      this.signalQuota();
      return 'sent';
    }
    const accepted = acceptedLength(error);
    if (status === 409 && accepted !== undefined) {
      // The server holds `accepted` bytes of the stream: carry on from there (see advance).
      const before = s.base;
      this.advance(s, accepted);
      if (s.base === before && ++s.fruitless >= 3) this.stop(`${name}: the server keeps refusing offset ${before}`);
      return 'sent';
    }
    if (status === 429 || status === 503 || status === 408 || status >= 500) {
      const retryAfter = Number(res.retryAfter);
      return Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter * 1000, this.o.retryMaxMs) : 'retry';
    }
    // 404 (not ours, or the run deleted), 409 STALE_SUBMISSION (no longer held, or past its grace), 4xx: final.
    this.stop(`${name}: chunk at offset ${offset} refused: ${status} ${error?.code ?? ''} ${error?.message ?? ''}`);
    return 'sent';
  }

  /**
   * The server holds `accepted` bytes of the stream. Ahead of ours: those bytes are delivered (a lost answer, or an
   * earlier shipper's). Behind ours (bytes the server never got, and this shipper no longer has): they are lost;
   * what waits goes on from the server's length, so the stream continues without a gap.
   */
  private advance(s: Pending, accepted: number): void {
    if (accepted >= s.base) {
      s.drop(Math.min(accepted - s.base, s.bytes));
      if (s.bytes <= this.o.highWaterBytes / 2) s.release();
    } else {
      this.warn(`bytes ${accepted}..${s.base} never reached the server; continuing from ${accepted}`);
    }
    s.base = accepted;
  }

  /**
   * One chunk, its bytes as the request's body (the route's binary form): no text encoding and no JSON on either
   * side, which cost more than storing the chunk (1 MiB: ~25 ms of the event loop the embedded worker shares with
   * its server, against ~20 ms for PostgreSQL to store it).
   */
  private async post(
    stream: LogStreamName,
    offset: number,
    chunk: Buffer,
  ): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
    const signal = AbortSignal.any([this.abort.signal, AbortSignal.timeout(this.o.requestTimeoutMs)]);
    const { data, error, response } = await this.api.POST('/internal/v1/submissions/{id}/logs/{stream}', {
      params: { path: { id: this.o.submissionId, stream }, query: { worker_id: this.o.workerId, offset } },
      // The typed client knows an octet-stream body as a string; the bytes go through as they are.
      body: chunk as unknown as string,
      bodySerializer: (bytes: unknown) => bytes as Buffer,
      headers: { 'content-type': 'application/octet-stream' },
      signal,
    });
    return { status: response.status, body: data ?? error, retryAfter: response.headers.get('retry-after') };
  }

  private stop(reason: string): void {
    if (this.stopped) return;
    this.stopped = true;
    this.stopReason = reason;
    this.abort.abort();
    for (const s of Object.values(this.streams)) {
      clearTimeout(s.timer);
      this.droppedBytes += s.bytes;
      s.drop(s.bytes);
      s.release();
    }
    if (!this.quota) this.warn(`log shipping stopped: ${reason}`);
  }

  private warn(message: string): void {
    this.o.onWarning?.(`submission ${this.o.submissionId}: ${message}`);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.abort.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.abort.signal.addEventListener('abort', done, { once: true });
    });
  }
}

/** Bytes the submission's log still has room for, from a 413 LOG_QUOTA_EXCEEDED's details (0 if unknown). */
function quotaRoom(error: Partial<ApiError>): number {
  for (const d of error.details ?? []) {
    const { quota_bytes: quota, used_bytes: used } = (d ?? {}) as { quota_bytes?: unknown; used_bytes?: unknown };
    if (typeof quota === 'number' && typeof used === 'number' && quota > used) return quota - used;
  }
  return 0;
}

/** `accepted_length` from a 409's details, if it carries one. */
function acceptedLength(error: Partial<ApiError> | undefined): number | undefined {
  for (const d of error?.details ?? []) {
    const n = (d as { accepted_length?: unknown } | null)?.accepted_length;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 0) return n;
  }
  return undefined;
}

/**
 * The chunk without a UTF-8 character cut at its end (when `trim` and something is left): the rest goes with the
 * next chunk, so text chunks stay text. Bytes that are not UTF-8 anyway are left as they are.
 */
function utf8Prefix(chunk: Buffer, trim: boolean): Buffer {
  if (!trim) return chunk;
  const n = chunk.length;
  // The start of the last character: back over at most 3 continuation bytes (10xxxxxx).
  let i = n - 1;
  while (i >= 0 && i > n - 4 && (chunk[i] & 0xc0) === 0x80) i--;
  if (i <= 0) return chunk;
  const lead = chunk[i];
  const need = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead <= 0xdf ? 2 : 1;
  if (lead < 0x80 || need === 1) return chunk;
  return i + need > n ? chunk.subarray(0, i) : chunk;
}
