import { Agent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

export type Fetch = (input: Request) => Promise<Response>;

/**
 * A request whose connection is silent this long fails (a TypeError, as fetch's network errors: the callers retry).
 * The global fetch's own limits (undici's head and body timeouts) are 300 s; a worker waiting that long on a lost
 * answer would hold its job's report, or all its heartbeats, for as long.
 */
const IDLE_TIMEOUT_MS = 60_000;

/**
 * `fetch` for the worker's typed clients, over node:http keep-alive connections. A worker sends a few requests per
 * job (claim, running, complete, its log chunks), and the global fetch (undici, with its WHATWG streams) spent about
 * 5 ms of CPU on each on a busy 2-core machine: on the event loop the embedded worker shares with its server. It
 * keeps fetch's contract where the clients rely on it: network trouble rejects with a TypeError, an aborted signal
 * rejects with its reason, the answer is a Response.
 */
export function nodeHttpFetch(idleTimeoutMs = IDLE_TIMEOUT_MS): Fetch {
  const http = new Agent({ keepAlive: true });
  const https = new HttpsAgent({ keepAlive: true });
  return async (input) => {
    const url = new URL(input.url);
    const secure = url.protocol === 'https:';
    const body = input.body ? Buffer.from(await input.arrayBuffer()) : undefined;
    const headers: Record<string, string> = {};
    input.headers.forEach((value, key) => (headers[key] = value));
    if (body) headers['content-length'] = String(body.length);
    const signal = input.signal;
    signal.throwIfAborted();
    return new Promise<Response>((resolve, reject) => {
      const onAbort = () => {
        req.destroy();
        reject(signal.reason);
      };
      const fail = (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(new TypeError('fetch failed', { cause: err }));
      };
      const answer = (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', fail);
        // Cut before its end: a network error, whatever Node reported (or not) on the way.
        res.on('close', () => res.complete || fail(new Error('the answer was cut short')));
        res.on('end', () => {
          signal.removeEventListener('abort', onAbort);
          const status = res.statusCode ?? 0;
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers))
            for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v]) h.append(k, one);
          const empty = status === 204 || status === 304 || input.method === 'HEAD';
          resolve(
            new Response(empty ? null : Buffer.concat(chunks), { status, statusText: res.statusMessage, headers: h }),
          );
        });
      };
      const options = { method: input.method, headers, agent: secure ? https : http };
      const req = secure ? httpsRequest(url, options, answer) : httpRequest(url, options, answer);
      signal.addEventListener('abort', onAbort, { once: true });
      req.setTimeout(idleTimeoutMs, () => req.destroy(new Error(`no answer for ${idleTimeoutMs} ms`)));
      req.on('error', fail);
      req.end(body);
    });
  };
}

/** One per process: its agents keep the connections to the server open between requests. */
export const workerFetch: Fetch = nodeHttpFetch();
