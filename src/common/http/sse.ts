import type { Request, Response } from 'express';

/** A comment line this often keeps proxies and load balancers from closing an idle stream. */
const HEARTBEAT_MS = 15_000;

/** Whether a GET asks for Server-Sent Events (`Accept: text/event-stream`). */
export const acceptsEventStream = (req: Request): boolean =>
  (req.headers.accept ?? '').toLowerCase().includes('text/event-stream');

/**
 * A Server-Sent Events response: headers sent at once, events written with backpressure (a slow reader pauses the
 * writer instead of growing a buffer), a heartbeat comment every 15 s, and `signal`, aborted when the client goes
 * away. Errors found before `open` are answered as usual; after it, the stream can only end.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;

  constructor(
    private readonly res: Response,
    retryMs = 1000,
  ) {
    res.status(200);
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
