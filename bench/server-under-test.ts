import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { Client } from 'pg';
import { ADMIN_URL, log, urlFor, withAdminClient } from './support';

/**
 * A runplane server as a deployment runs it: the built CLI's `serve` in a process of its own, on a fresh database,
 * so the bench's HTTP clients never share its event loop and its memory can be read from /proc. `cli` may be
 * another build (a checkout of an earlier commit, for figures side by side in one sitting).
 */
export class ServerUnderTest {
  private maxRssKiB = 0;
  private sampler?: NodeJS.Timeout;
  private readonly agent = new Agent({ keepAlive: true });

  private constructor(
    readonly label: string,
    readonly dbName: string,
    readonly databaseUrl: string,
    readonly baseUrl: string,
    readonly token: string,
    private readonly child: ChildProcess,
    private readonly output: () => string,
  ) {}

  static async start(label: string, cli: string, env: Record<string, string> = {}): Promise<ServerUnderTest> {
    if (!existsSync(cli)) throw new Error(`${label}: no built CLI at ${cli}`);
    const dbName = `runplane_bench_${process.pid}_srv_${label.replace(/[^a-z0-9]/g, '_')}`;
    const databaseUrl = urlFor(ADMIN_URL, dbName);
    await withAdminClient(async (c) => {
      await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      await c.query(`CREATE DATABASE "${dbName}"`);
      // BENCH_LOG_STATEMENTS=1: PostgreSQL logs every statement of this database with its duration (where the time
      // goes, statement by statement: see the server's log).
      if (process.env.BENCH_LOG_STATEMENTS === '1')
        await c.query(`ALTER DATABASE "${dbName}" SET log_min_duration_statement = 0`);
    });
    const token = `rp_bench_admin_${process.pid}_${'0'.repeat(24)}`;
    const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, cli, 'serve'], {
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: databaseUrl,
        RUNPLANE_ADMIN_TOKEN: token,
        RUNPLANE_EMBEDDED_WORKER: 'false',
        RUNPLANE_DATA_DIR: join('/tmp', `${dbName}-data`),
        RUNPLANE_RATE_LIMIT_USER_REQUESTS: '0',
        RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS: '0',
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'json',
        PORT: '0',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${label}: server did not start:\n${out}`)), 120_000);
      const onData = () => {
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (!m) return;
        clearTimeout(timer);
        resolve(m[1]);
      };
      child.stdout?.on('data', onData);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${label}: server exited with ${code}:\n${out}`));
      });
    });
    const server = new ServerUnderTest(label, dbName, databaseUrl, url, token, child, () => out);
    server.sampler = setInterval(() => server.sampleRss(), 250);
    server.sampler.unref();
    return server;
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  /** Resident memory now, KiB (VmRSS). */
  rssKiB(): number {
    try {
      const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${this.pid}/status`, 'utf8'));
      return m ? Number(m[1]) : 0;
    } catch {
      return 0;
    }
  }

  private sampleRss(): void {
    this.maxRssKiB = Math.max(this.maxRssKiB, this.rssKiB());
  }

  /** The highest resident memory seen since start (sampled every 250 ms, and whenever asked). */
  peakRssMiB(): number {
    this.sampleRss();
    return this.maxRssKiB / 1024;
  }

  /** CPU seconds the server process has used (user + system). */
  cpuSeconds(): number {
    return processCpuSeconds(this.pid);
  }

  /** A JSON request with the admin's token (or `token`); throws unless the status is `expect` (default 2xx). */
  async http<T = unknown>(method: string, path: string, body?: unknown, expect?: number, token = this.token) {
    const res = await this.send(method, path, body, token);
    const ok = expect === undefined ? res.status >= 200 && res.status < 300 : res.status === expect;
    if (!ok)
      throw new Error(`${this.label}: ${method} ${path} → ${res.status} (expected ${expect ?? '2xx'}): ${res.text}`);
    return { status: res.status, body: (res.text ? JSON.parse(res.text) : null) as T, bytes: res.bytes };
  }

  /** A request answered in full; the body is not parsed. */
  send(
    method: string,
    path: string,
    body: unknown,
    token = this.token,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; text: string; bytes: number; headers: Record<string, unknown> }> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        this.baseUrl + path,
        {
          method,
          agent: this.agent,
          headers: {
            authorization: `Bearer ${token}`,
            ...(payload === undefined
              ? {}
              : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
            ...headers,
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const buf = Buffer.concat(chunks);
            resolve({
              status: res.statusCode ?? 0,
              text: buf.toString('utf8'),
              bytes: buf.length,
              headers: res.headers,
            });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** A service account for workers; returns its token. */
  async serviceToken(name: string): Promise<string> {
    const res = await this.http<{ token: string }>('POST', '/api/v1/users', { name, global_role: 'service' }, 201);
    return res.body.token;
  }

  async createProject(name: string): Promise<string> {
    await this.http('POST', '/api/v1/projects', { name }, 201);
    return name;
  }

  async invariantMismatches(): Promise<string[]> {
    const res = await this.http<{ mismatches: { invariant: string; detail: string }[] }>(
      'GET',
      '/admin/v1/invariants',
      undefined,
      200,
    );
    return res.body.mismatches.map((m) => `${m.invariant}: ${m.detail}`);
  }

  /** A client of the server's own database (bulk set-up, baselines, sampling). */
  async dbClient(): Promise<Client> {
    const c = new Client({ connectionString: this.databaseUrl, application_name: 'runplane-bench' });
    await c.connect();
    return c;
  }

  /**
   * What autovacuum does on a deployed server as tables grow (dead rows removed, statistics refreshed, and with them
   * the plans sessions cached): the machine the benches and CI run on has autovacuum off, so a bench that writes
   * for minutes does it itself between timed parts, on every contender alike.
   */
  async vacuum(): Promise<void> {
    const c = await this.dbClient();
    try {
      await c.query('VACUUM (ANALYZE)');
    } finally {
      await c.end();
    }
  }

  async stop(): Promise<void> {
    if (this.sampler) clearInterval(this.sampler);
    this.agent.destroy();
    if (this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(timer);
    }
    await withAdminClient(async (c) => {
      if (process.env.BENCH_KEEP_DB === '1') return log(`kept database ${this.dbName}`);
      await c.query(`DROP DATABASE IF EXISTS "${this.dbName}" WITH (FORCE)`);
    });
  }

  lastOutput(chars = 2000): string {
    return this.output().slice(-chars);
  }
}

/** user + system CPU seconds of a process, from /proc/<pid>/stat (0 once it is gone). */
export function processCpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return 0;
  }
}

/** CPU seconds used by every PostgreSQL process of this machine (all backends and the server's own processes). */
export function postgresCpuSeconds(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== 'postgres') continue;
    } catch {
      continue;
    }
    total += processCpuSeconds(Number(entry));
  }
  return total;
}
