import { CallHandler, ExecutionContext, Injectable, NestInterceptor, StreamableFile } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import type { FastifyReply } from 'fastify';
import { map, Observable } from 'rxjs';

/**
 * JSON text taken as is from PostgreSQL (`jsonb::text`), to be spliced into a response without parsing it in Node
 * and serialising it again: for list pages that carry megabytes of provisioning/runtime data, that round trip was
 * most of the request's cost. Anywhere else (a plain JSON.stringify) it behaves as the value it holds.
 */
export class RawJson {
  /** The JSON text, or its UTF-8 bytes. */
  constructor(readonly json: string | Buffer) {}

  toJSON(): unknown {
    // While splicing: a marker standing for the text, never parsed (see serializeWithRaw). Anywhere else: the value.
    if (splice) return splice.marker(this.json);
    return JSON.parse(typeof this.json === 'string' ? this.json : this.json.toString('utf8'));
  }
}

/** The splice under way (JSON.stringify is synchronous: at most one at a time). */
let splice: { marker: (json: string | Buffer) => string } | null = null;

export const rawJson = (json: string | Buffer | null): RawJson | null => (json === null ? null : new RawJson(json));

const SPLICE = Symbol('runplane:splice-raw-json');

/** Marks a response body that holds RawJson values, for RawJsonInterceptor. */
export function withRawJson<T extends object>(body: T): T {
  Object.defineProperty(body, SPLICE, { value: true, enumerable: false });
  return body;
}

/**
 * JSON.stringify, with every RawJson replaced by its text, encoded straight into one UTF-8 buffer. The skeleton
 * (everything but the raw texts) is stringified with each RawJson's toJSON giving a marker, the same for all of them
 * and carrying a per-call nonce, so data can't forge one; the markers come in the order the texts were met, so the
 * k-th is the k-th text. Writing skeleton pieces and raw texts into one buffer keeps the megabytes of raw text from
 * being copied into another string and then encoded again (a 14 MB runs page: 210 → 182 ms). The markers come from
 * toJSON rather than a replacer function, which JSON.stringify would call for every key of the page (a 2.6 MB runs
 * page: 12–15 → 10–12 ms).
 */
export function serializeWithRaw(value: unknown, alloc: (size: number) => Buffer = Buffer.allocUnsafe): Buffer {
  const raw = `\u0000${randomBytes(8).toString('hex')}`;
  const raws: (string | Buffer)[] = [];
  let skeleton: string;
  splice = {
    marker: (json) => {
      raws.push(json);
      return raw;
    },
  };
  try {
    skeleton = JSON.stringify(value);
  } finally {
    splice = null;
  }
  // As the skeleton spells a marker: the JSON string of "\u0000" and the nonce.
  const marker = `"\\u0000${raw.slice(1)}"`;
  const at: number[] = [];
  for (let i = skeleton.indexOf(marker); i !== -1; i = skeleton.indexOf(marker, i + marker.length)) at.push(i);
  if (at.length !== raws.length) throw new Error(`spliced JSON: ${at.length} markers for ${raws.length} texts`);
  // Markers are ASCII: their bytes are their length.
  let length = Buffer.byteLength(skeleton, 'utf8') - at.length * marker.length;
  for (const r of raws) length += typeof r === 'string' ? Buffer.byteLength(r, 'utf8') : r.length;
  const out = alloc(length);
  let offset = 0;
  let from = 0;
  at.forEach((i, k) => {
    offset += out.write(skeleton.slice(from, i), offset, 'utf8');
    const r = raws[k];
    offset += typeof r === 'string' ? out.write(r, offset, 'utf8') : r.copy(out, offset);
    from = i + marker.length;
  });
  offset += out.write(skeleton.slice(from), offset, 'utf8');
  if (offset !== length) throw new Error(`spliced JSON: wrote ${offset} bytes of ${length}`);
  return out.subarray(0, length);
}

/**
 * Large response buffers, reused from one response to the next. Memory the process has not touched yet is costly
 * on virtual machines like ours: filling a newly allocated 14 MB buffer measured 47 ms (page faults), refilling one
 * already in use 1 ms, and a runs page with 10 submissions per job is 14 MB. A buffer goes back to the pool when its
 * response has been handed to the operating system ('finish'); at most MAX_IDLE_BYTES wait there.
 */
export class ResponseBufferPool {
  static readonly MIN_POOLED = 256 << 10;
  static readonly MAX_IDLE_BYTES = 64 << 20;
  private idle: Buffer[] = [];

  acquire(size: number): Buffer {
    if (size < ResponseBufferPool.MIN_POOLED) return Buffer.allocUnsafe(size);
    let best = -1;
    for (let i = 0; i < this.idle.length; i++) {
      if (this.idle[i].length >= size && (best < 0 || this.idle[i].length < this.idle[best].length)) best = i;
    }
    if (best >= 0) return this.idle.splice(best, 1)[0];
    // Whole MiBs, so a page a little larger than the last one still fits next time.
    return Buffer.allocUnsafeSlow(Math.ceil(size / (1 << 20)) * (1 << 20));
  }

  /** Takes back a buffer from acquire (or a view of one) once nothing reads it any more. */
  release(buf: Buffer): void {
    const whole = Buffer.from(buf.buffer, buf.byteOffset, buf.buffer.byteLength - buf.byteOffset);
    if (whole.length < ResponseBufferPool.MIN_POOLED || whole.length > ResponseBufferPool.MAX_IDLE_BYTES) return;
    // Keep the largest buffers that fit the budget.
    this.idle.push(whole);
    this.idle.sort((a, b) => b.length - a.length);
    let total = 0;
    this.idle = this.idle.filter((b) => (total += b.length) <= ResponseBufferPool.MAX_IDLE_BYTES);
  }

  get idleBytes(): number {
    return this.idle.reduce((n, b) => n + b.length, 0);
  }
}

const responseBuffers = new ResponseBufferPool();

/** Sends bodies marked by withRawJson as spliced JSON (see serializeWithRaw), in buffers reused across responses. */
@Injectable()
export class RawJsonInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((body: unknown) => {
        if (!body || typeof body !== 'object' || !(body as Record<symbol, unknown>)[SPLICE]) return body;
        const json = serializeWithRaw(body, (size) => responseBuffers.acquire(size));
        // Reused only after the whole body was handed to the OS; a response cut short leaves its buffer to the GC.
        context
          .switchToHttp()
          .getResponse<FastifyReply>()
          .raw.once('finish', () => responseBuffers.release(json));
        return new StreamableFile(json, { type: 'application/json; charset=utf-8', length: json.length });
      }),
    );
  }
}
