import { ClientRequest, IncomingMessage, request } from 'node:http';
import { required } from '../../src/common/required';

/** One Server-Sent Event as a follower received it. */
export interface ReceivedEvent {
  id: string;
  event: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  /** Date.now() when its last byte arrived. */
  receivedAt: number;
}

/**
 * A minimal EventSource for tests, over node:http: parses `id:`, `event:`, `data:` and comments; keeps every event
 * with data, and the last `id:` seen (events or bare ids, as EventSource's lastEventId).
 */
export class SseClient {
  readonly events: ReceivedEvent[] = [];
  lastId: string | undefined;
  comments = 0;
  status = 0;
  ended = false;
  private buffer = '';
  private req?: ClientRequest;
  private res?: IncomingMessage;
  private waiters: (() => void)[] = [];

  private constructor() {}

  /** Opens the stream; resolves once the response head arrived (status in `status`; the body of a refusal too). */
  static async open(
    url: string,
    token: string,
    headers: Record<string, string> = {},
  ): Promise<SseClient & { body: string }> {
    const c = new SseClient() as SseClient & { body: string };
    c.body = '';
    const u = new URL(url);
    await new Promise<void>((resolve, reject) => {
      c.req = request(
        {
          host: u.hostname,
          port: u.port,
          path: `${u.pathname}${u.search}`,
          headers: { Accept: 'text/event-stream', Authorization: `Bearer ${token}`, ...headers },
        },
        (res) => {
          c.res = res;
          c.status = res.statusCode ?? 0;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (c.status !== 200) c.body += chunk;
            else c.feed(chunk);
          });
          res.on('end', () => {
            c.ended = true;
            c.notify();
          });
          res.on('error', () => undefined);
          resolve();
        },
      );
      c.req.on('error', reject);
      c.req.end();
    });
    if (c.status !== 200) await new Promise((r) => required(c.res, 'the response').once('end', r));
    return c;
  }

  private feed(chunk: string): void {
    this.buffer += chunk;
    let cut: number;
    while ((cut = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, cut);
      this.buffer = this.buffer.slice(cut + 2);
      let id: string | undefined;
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) this.comments++;
        else if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('event: ')) event = line.slice(7);
        else if (line.startsWith('data: ')) data.push(line.slice(6));
      }
      if (id !== undefined) this.lastId = id;
      if (data.length > 0) {
        this.events.push({ id: id ?? '', event, data: JSON.parse(data.join('\n')), receivedAt: Date.now() });
      }
    }
    this.notify();
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Waits until `done()` holds (checked on every chunk), or fails after `timeoutMs`. */
  async until(done: () => boolean, timeoutMs: number, what = 'events'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.ended) throw new Error(`stream ended while waiting for ${what} (${this.events.length} received)`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} (${this.events.length} received)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Resolves when the server ends the stream. */
  ending(timeoutMs: number): Promise<void> {
    return this.until(() => this.ended, timeoutMs, 'the end of the stream');
  }

  close(): void {
    this.req?.destroy();
  }
}
