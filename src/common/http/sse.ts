import type { IncomingMessage, ServerResponse } from 'node:http';

/** A comment line this often keeps proxies and load balancers from closing an idle stream. */
const HEARTBEAT_MS = 15_000;

/** Whether a GET asks for Server-Sent Events (`Accept: text/event-stream`). */
export const acceptsEventStream = (req: IncomingMessage): boolean =>
  (req.headers.accept ?? '').toLowerCase().includes('text/event-stream');

/**
 * The first of `offered` media types the Accept header prefers (quality, then how specific its range is, then its
 * place in the header, then the order offered), as HTTP content negotiation has it; the first offered when the header
 * is absent, undefined when it refuses all of them.
 */
export function preferredType(accept: string | undefined, offered: readonly string[]): string | undefined {
  if (!accept) return offered[0];
  const ranges = accept.split(',').flatMap((part, index) => {
    const [range, ...params] = part.trim().toLowerCase().split(';');
    const [type, subtype] = range.trim().split('/');
    if (!type || !subtype) return [];
    const q = params.map((p) => /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p)).find(Boolean);
    return [{ type, subtype, q: q ? Number(q[1]) : 1, index }];
  });
  const scored = offered.flatMap((media, order) => {
    const [type, subtype] = media.toLowerCase().split('/');
    let best: { q: number; specificity: number; index: number } | undefined;
    for (const r of ranges) {
      const exact = r.type === type && r.subtype === subtype;
      const specificity = exact ? 2 : r.type === type && r.subtype === '*' ? 1 : r.type === '*' ? 0 : -1;
      if (specificity < 0) continue;
      if (!best || specificity > best.specificity) best = { q: r.q, specificity, index: r.index };
    }
    return best && best.q > 0 ? [{ media, order, ...best }] : [];
  });
  scored.sort((a, b) => b.q - a.q || b.specificity - a.specificity || a.index - b.index || a.order - b.order);
  return scored[0]?.media;
}

/**
 * A Server-Sent Events response: headers sent at once, events written with backpressure (a slow reader pauses the
 * writer instead of growing a buffer), a heartbeat comment every 15 s, and `signal`, aborted when the client goes
 * away. Errors found before `open` are answered as usual; after it, the stream can only end.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly res: ServerResponse,
    retryMs = 1000,
  ) {
    res.statusCode = 200;
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no'); // nginx: pass events through as they come
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    // The response's 'close' (not the request's: that one fires once a body is read) is the connection going away.
    const gone = () => this.controller.abort();
    res.on('close', gone);
    res.on('error', gone);
    this.heartbeat = setInterval(() => void this.write(': heartbeat\n\n'), HEARTBEAT_MS);
    this.heartbeat.unref();
    void this.write(`retry: ${retryMs}\n\n`);
  }

  /** Aborted once the client has gone (or the stream was ended). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** One event; `data` may span lines (each becomes a `data:` line). Resolves once the socket takes more. */
  send(event: { id?: string; event?: string; data: string }): Promise<void> {
    let text = '';
    if (event.event) text += `event: ${event.event}\n`;
    if (event.id) text += `id: ${event.id}\n`;
    for (const line of event.data.split('\n')) text += `data: ${line}\n`;
    return this.write(`${text}\n`);
  }

  end(): void {
    clearInterval(this.heartbeat);
    if (!this.res.writableEnded) this.res.end();
    this.controller.abort();
  }

  private write(text: string): Promise<void> {
    if (this.controller.signal.aborted || this.res.writableEnded) return Promise.resolve();
    if (this.res.write(text)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.res.off('drain', done);
        this.controller.signal.removeEventListener('abort', done);
        resolve();
      };
      this.res.once('drain', done);
      this.controller.signal.addEventListener('abort', done, { once: true });
    });
  }
}
