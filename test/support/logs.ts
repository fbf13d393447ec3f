import { request } from 'node:http';
import type { TestApp, TestUser } from './test-app';

export interface LogItem {
  stream: 'stdout' | 'stderr';
  offset: number;
  at: string;
  data: string;
  encoding: 'utf8' | 'base64';
}

export const bytesOf = (item: LogItem): Buffer =>
  Buffer.from(item.data, item.encoding === 'base64' ? 'base64' : 'utf8');

/** A job's log read page by page through the public route: every item in order, and each stream's bytes. */
export async function readLog(
  t: TestApp,
  user: TestUser,
  path: string,
  query: Record<string, string | number> = {},
): Promise<{ items: LogItem[]; stdout: Buffer; stderr: Buffer; pages: number; lastCursor: string | null }> {
  const items: LogItem[] = [];
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const res = await t.http
      .get(path)
      .query({ limit: 100, ...query, ...(cursor ? { cursor } : {}) })
      .set(user.auth);
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    pages++;
    items.push(...res.body.items);
    // A running submission's last page still has a cursor (to ask again later): stop at an empty page.
    if (res.body.next_cursor === null || res.body.items.length === 0)
      return { items, ...streams(items), pages, lastCursor: res.body.next_cursor };
    cursor = res.body.next_cursor;
  }
}

/** Each stream's bytes, concatenated in the items' order, checked to be contiguous. */
export function streams(items: LogItem[]): { stdout: Buffer; stderr: Buffer } {
  const out = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  const next = { stdout: 0, stderr: 0 };
  for (const item of items) {
    if (item.offset !== next[item.stream])
      throw new Error(`${item.stream}: chunk at ${item.offset}, expected ${next[item.stream]}`);
    const b = bytesOf(item);
    out[item.stream].push(b);
    next[item.stream] += b.length;
  }
  return { stdout: Buffer.concat(out.stdout), stderr: Buffer.concat(out.stderr) };
}

export interface SseEvent {
  event: string;
  id?: string;
  data: string;
}

/**
 * Follows an SSE URL over node:http: events as they arrive (`events`), `done` once the server closes the stream.
 * `status` and `contentType` come with the response head.
 */
export function followSse(
  baseUrl: string,
  path: string,
  headers: Record<string, string>,
  onEvent?: (e: SseEvent) => void,
): { events: SseEvent[]; done: Promise<{ status: number; contentType: string; body: string }>; close: () => void } {
  const events: SseEvent[] = [];
  const url = new URL(path, baseUrl);
  let closeIt: () => void = () => undefined;
  const done = new Promise<{ status: number; contentType: string; body: string }>((resolve, reject) => {
    const req = request(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
      let buffer = '';
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (text: string) => {
        body += text;
        buffer += text;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const e: SseEvent = { event: 'message', data: '' };
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue; // a comment (heartbeat)
            const i = line.indexOf(':');
            const field = i === -1 ? line : line.slice(0, i);
            const value = i === -1 ? '' : line.slice(i + 1).replace(/^ /, '');
            if (field === 'event') e.event = value;
            else if (field === 'id') e.id = value;
            else if (field === 'data') data.push(value);
          }
          if (data.length === 0) continue; // no event (e.g. `retry:` alone)
          e.data = data.join('\n');
          events.push(e);
          onEvent?.(e);
        }
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type']), body }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
    closeIt = () => req.destroy();
  });
  return { events, done, close: () => closeIt() };
}
