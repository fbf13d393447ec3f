import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServerProcess, startServer } from './server-process';

/**
 * N runplane processes (the built CLI's `serve`, as a user runs it) on one database, each on its own port, and an
 * HTTP client that spreads requests over them round-robin, as a load balancer would. For the multi-instance tests
 * and the `instances` bench. A connection refused (an instance restarting or killed) is tried on the next
 * instance; so is a connection reset, for requests that are safe to repeat (GET, or a POST with an Idempotency-Key).
 */

export interface Answer {
  status: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any route's JSON, read by callers that know it
  body: any;
  text: string;
  /** The instance that answered. */
  instance: number;
  /** Connection failures met (and retried on another instance) before the answer. */
  retried: number;
}

export interface CallOptions {
  token?: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** Sends an Idempotency-Key (a fresh one unless given), which also makes a reset connection safe to retry. */
  idempotent?: boolean | string;
  /** Send to this instance (no spreading; still moves on if it refuses). */
  instance?: number;
  /**
   * Safe to send again after a reset connection: worker reports (a repeated report is answered 200 or 409) and
   * claims (a claim whose answer was lost only leaves a lease to lapse). A draining instance resets connections it
   * accepted but had not read a request from yet.
   */
  safe?: boolean;
}

export const ADMIN_TOKEN = `rp-multi-admin-${'x'.repeat(24)}`;

export class Instances {
  private turn = 0;
  /** Every connection failure met, by code (ECONNREFUSED while an instance restarts is expected). */
  readonly connectionErrors: Record<string, number> = {};

  private constructor(
    readonly env: Record<string, string>,
    readonly processes: (ServerProcess | undefined)[],
    private readonly dataDir: string,
  ) {}

  /** Starts `n` instances together on `databaseUrl` (they take turns at the migrations lock). */
  static async start(n: number, databaseUrl: string, env: Record<string, string> = {}): Promise<Instances> {
    const dataDir = mkdtempSync(join(tmpdir(), 'runplane-instances-'));
    const set = new Instances(
      {
        DATABASE_URL: databaseUrl,
        RUNPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
        RUNPLANE_EMBEDDED_WORKER: 'false',
        RUNPLANE_BACKGROUND_LOOPS: 'true',
        RUNPLANE_DATA_DIR: dataDir,
        DATABASE_POOL_SIZE: '5',
        RUNPLANE_SHUTDOWN_GRACE_SECONDS: '10',
        ...env,
      },
      [],
      dataDir,
    );
    try {
      const started = await Promise.allSettled(Array.from({ length: n }, () => set.spawn()));
      for (const s of started) if (s.status === 'fulfilled') set.processes.push(s.value);
      const failed = started.find((s) => s.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
    } catch (err) {
      await set.close();
      throw err;
    }
    return set;
  }

  get size(): number {
    return this.processes.length;
  }

  /** What instance `i` has printed so far (its log), for a failing test to show. */
  output(i: number): string {
    return this.processes[i]?.output() ?? '';
  }

  url(i: number): string | undefined {
    return this.processes[i]?.url;
  }

  private spawn(): Promise<ServerProcess> {
    // A loaded 2-core machine starting several instances at once can take a while.
    return startServer(this.env, ['serve'], 120_000);
  }

  /** Starts instance `i` again (after a stop or kill), on a new port. */
  async start(i: number): Promise<void> {
    this.processes[i] = await this.spawn();
  }

  /** Stops instance `i` with `signal` and waits for it to exit; returns its exit code. */
  async stop(i: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const p = this.processes[i];
    if (!p) return null;
    const code = await p.stop(signal);
    this.processes[i] = undefined;
    return code;
  }

  /** kill -9: no shutdown at all; its sessions end when the kernel closes its sockets. */
  async kill9(i: number): Promise<void> {
    await this.stop(i, 'SIGKILL');
  }

  async restart(i: number): Promise<number | null> {
    const code = await this.stop(i, 'SIGTERM');
    await this.start(i);
    return code;
  }

  /** One request, spread round-robin over the running instances. */
  async call(method: string, path: string, options: CallOptions = {}): Promise<Answer> {
    const key =
      options.idempotent === true
        ? randomBytes(12).toString('hex')
        : typeof options.idempotent === 'string'
          ? options.idempotent
          : undefined;
    const safe = method === 'GET' || key !== undefined || options.safe === true;
    let retried = 0;
    for (let attempt = 0; ; attempt++) {
      const i = options.instance !== undefined && attempt === 0 ? options.instance : this.pick();
      const url = this.url(i);
      if (url === undefined) {
        await sleep(50);
        continue;
      }
      try {
        const answer = await send(url, method, path, options, key);
        return { ...answer, instance: i, retried };
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'ERROR';
        this.connectionErrors[code] = (this.connectionErrors[code] ?? 0) + 1;
        const refused = code === 'ECONNREFUSED';
        if ((!refused && !safe) || attempt >= 50) throw err;
        retried++;
        await sleep(refused ? 5 : 20);
      }
    }
  }

  private pick(): number {
    for (let k = 0; k < this.processes.length; k++) {
      const i = this.turn++ % this.processes.length;
      if (this.processes[i]) return i;
    }
    return 0;
  }

  /** /metrics of instance `i`. */
  async metrics(i: number): Promise<string> {
    return (await this.call('GET', '/metrics', { instance: i })).text;
  }

  /** A gauge or counter's value in instance `i`'s /metrics (the first series of that name), or undefined. */
  async metric(i: number, name: string): Promise<number | undefined> {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(await this.metrics(i));
    return m ? Number(m[1]) : undefined;
  }

  /** A user (or admin or service account) made through the admin API; returns its token. */
  async user(role: 'user' | 'admin' | 'service' = 'user'): Promise<{ name: string; token: string; id: string }> {
    const name = `${role}-${randomBytes(5).toString('hex')}`;
    const res = await this.call('POST', '/api/v1/users', {
      token: ADMIN_TOKEN,
      body: { name, global_role: role },
      idempotent: true,
    });
    if (res.status !== 201) throw new Error(`creating a user: ${res.status} ${res.text}`);
    return { name, token: res.body.token, id: res.body.user.id };
  }

  async close(): Promise<void> {
    await Promise.all(this.processes.map((_, i) => this.stop(i, 'SIGTERM').catch(() => undefined)));
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One request on a connection of its own (no keep-alive: a restarting instance refuses, never resets, a new one). */
function send(
  baseUrl: string,
  method: string,
  path: string,
  options: CallOptions,
  key: string | undefined,
): Promise<Omit<Answer, 'instance' | 'retried'>> {
  const base = new URL(baseUrl);
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const headers: Record<string, string> = { ...options.headers };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (key) headers['idempotency-key'] = key;
  return new Promise((resolve, reject) => {
    const req = request({ host: base.hostname, port: base.port, path, method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('error', reject);
      res.on('end', () => {
        let body: unknown = undefined;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body, text });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}
