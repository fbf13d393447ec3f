import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'pg';
import { DataSource } from 'typeorm';
import { AppModule } from '../src/app.module';
import { createHttpAdapter } from '../src/common/http/http-adapter';
import { configureApp } from '../src/configure-app';
import { dataSourceOptions } from '../src/infra/database/data-source-options';
import { runMigrationsLocked } from '../src/infra/database/migrations-runner';
import { UsersService } from '../src/modules/users/users.service';

/**
 * Bench support: a fresh database per suite (dropped at the end, even on failure or Ctrl-C), the real app booted
 * in-process over it, an admin token, a raw `pg` pool for bulk data generation and baselines, timing and tables.
 */

export const ADMIN_URL = process.env.BENCH_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
/** BENCH_QUICK=1: small shapes and few iterations, to check the scripts themselves (figures not meaningful). */
export const QUICK = process.env.BENCH_QUICK === '1';

const DB_PREFIX = 'runplane_bench_';

export function urlFor(adminUrl: string, database: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

export async function withAdminClient<T>(fn: (c: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Clean-up on every exit path (normal end, exception, SIGINT/SIGTERM).

type Cleanup = () => Promise<void>;
const cleanups = new Set<Cleanup>();
let signalsInstalled = false;
let interrupted = false;
/** True once SIGINT/SIGTERM arrived: whatever fails after that is the clean-up pulling the rug, not a result. */
export const isInterrupted = () => interrupted;

function installSignalHandlers(): void {
  if (signalsInstalled) return;
  signalsInstalled = true;
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted = true;
    process.stderr.write(`\nbench: ${signal} received, cleaning up (app, pool, bench databases)...\n`);
    void runAllCleanups().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}

let cleaning: Promise<void> | null = null;

/** Runs every registered clean-up once, newest first; concurrent callers (a signal, a finally) share one pass. */
function runAllCleanups(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of [...cleanups].reverse()) {
      cleanups.delete(c);
      try {
        await c();
      } catch (err) {
        process.stderr.write(`bench: clean-up step failed: ${String(err)}\n`);
      }
    }
  })().finally(() => {
    cleaning = null;
  });
  return cleaning;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Drops bench databases left behind by earlier bench processes that are gone (e.g. killed with SIGKILL). */
async function dropStaleDatabases(c: Client): Promise<void> {
  const { rows } = await c.query<{ datname: string }>(
    `SELECT datname FROM pg_database WHERE datname LIKE '${DB_PREFIX}%'`,
  );
  for (const { datname } of rows) {
    const m = /^runplane_bench_(\d+)_/.exec(datname);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || isAlive(pid)) continue;
    await c.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The bench environment: database, app, admin, HTTP.

export interface HttpResult<T = unknown> {
  status: number;
  body: T;
  bytes: number;
}

export class BenchEnv {
  /** Set by createBenchEnv. */
  app!: NestFastifyApplication;
  baseUrl!: string;
  token!: string;
  adminName!: string;
  pool!: Pool;
  private readonly agent = new Agent({ keepAlive: true });

  constructor(
    readonly suite: string,
    readonly dbName: string,
    readonly url: string,
  ) {}

  get auth(): Record<string, string> {
    return { Authorization: `Bearer ${this.token}` };
  }

  /** A JSON request to the app; throws unless the status is `expect` (default: any 2xx). */
  async http<T = unknown>(method: string, path: string, body?: unknown, expect?: number): Promise<HttpResult<T>> {
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: { ...this.auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const ok = expect === undefined ? res.status >= 200 && res.status < 300 : res.status === expect;
    if (!ok) throw new Error(`${method} ${path} → ${res.status} (expected ${expect ?? '2xx'}): ${text.slice(0, 500)}`);
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T, bytes: Buffer.byteLength(text) };
  }

  /**
   * A GET whose body is read completely but not parsed (what a timing should include: HTTP, JSON, auth), over
   * node:http keep-alive connections: a client reading a 14 MB page through fetch's streams spent more CPU than the
   * server writing it, on the same core, and would have been timed as the server's.
   */
  getRaw(path: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(this.baseUrl + path, { agent: this.agent, headers: this.auth }, (res) => {
        let bytes = 0;
        const head: Buffer[] = [];
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (res.statusCode !== 200 && head.length < 4) head.push(chunk);
        });
        res.on('end', () => {
          if (res.statusCode !== 200)
            reject(new Error(`GET ${path} → ${res.statusCode}: ${Buffer.concat(head).toString('utf8').slice(0, 500)}`));
          else resolve(bytes);
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  /**
   * The app's own consistency check (GET /admin/v1/invariants: counters, job facts, run status recomputed from raw
   * rows). Data written by SQL must pass it, or the figures would be about a state the app never produces.
   */
  async assertInvariants(when: string): Promise<void> {
    const mismatches = await this.invariantMismatches();
    if (mismatches.length > 0)
      throw new Error(
        `invariants after ${when}: ${mismatches.length} mismatches, first: ${mismatches.slice(0, 5).join('; ')}`,
      );
  }

  async invariantMismatches(): Promise<string[]> {
    const res = await this.http<{ ok: boolean; mismatches: { invariant: string; detail: string }[] }>(
      'GET',
      '/admin/v1/invariants',
      undefined,
      200,
    );
    const out = res.body.mismatches.map((m) => `${m.invariant}: ${m.detail}`);
    return !res.body.ok && out.length === 0 ? ['report not ok, no mismatch listed'] : out;
  }

  /** Creates a project through the API (the admin becomes its project admin). */
  async createProject(name: string): Promise<string> {
    const res = await this.http<{ name: string }>('POST', '/api/v1/projects', { name }, 201);
    return res.body.name;
  }
}

/**
 * Creates `runplane_bench_<pid>_<suite>`, migrates it with the app's own migrations runner, boots the real app on
 * it (127.0.0.1, a free port), creates an admin. Everything is registered for clean-up.
 */
export async function createBenchEnv(suite: string): Promise<BenchEnv> {
  installSignalHandlers();
  const dbName = `${DB_PREFIX}${process.pid}_${suite.replace(/[^a-z0-9]/g, '_')}`;
  const url = urlFor(ADMIN_URL, dbName);
  const env = new BenchEnv(suite, dbName, url);

  await withAdminClient(async (c) => {
    await dropStaleDatabases(c);
    await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await c.query(`CREATE DATABASE "${dbName}"`);
  });
  // BENCH_KEEP_DB=1 keeps the loaded data for inspection, renamed out of the stale-database sweep.
  const kept = `runplane_kept_${suite.replace(/[^a-z0-9]/g, '_')}`;
  const dropDb: Cleanup = () =>
    withAdminClient(async (c) => {
      if (process.env.BENCH_KEEP_DB !== '1')
        return void (await c.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`));
      await c.query(`DROP DATABASE IF EXISTS "${kept}" WITH (FORCE)`);
      await c.query(`ALTER DATABASE "${dbName}" RENAME TO "${kept}"`);
      log(`kept the database as ${kept}`);
    });
  cleanups.add(dropDb);

  const ds = new DataSource(dataSourceOptions({ url, poolSize: 1, embedded: false }));
  await ds.initialize();
  try {
    await runMigrationsLocked(ds);
  } finally {
    await ds.destroy();
  }

  process.env.DATABASE_URL = url;
  process.env.LOG_LEVEL = 'silent';
  process.env.RUNPLANE_BACKGROUND_LOOPS = 'false';
  const app = await NestFactory.create<NestFastifyApplication>(AppModule, createHttpAdapter(), {
    logger: false,
    bodyParser: false,
  });
  const closeApp: Cleanup = () => app.close();
  cleanups.add(closeApp);
  configureApp(app);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as AddressInfo;
  env.app = app;
  env.baseUrl = `http://127.0.0.1:${address.port}`;

  const created = await app.get(UsersService).createUser(`bench-admin-${process.pid}`, 'admin');
  env.token = created.token;
  env.adminName = created.user.name;

  env.pool = new Pool({
    connectionString: url,
    max: 4,
    options: '-c timezone=UTC',
    application_name: 'runplane-bench',
  });
  const endPool: Cleanup = () => env.pool.end();
  cleanups.add(endPool);
  return env;
}

/** Closes what createBenchEnv opened (pool, app) and drops the database. Safe to call once per env. */
export async function closeBenchEnv(): Promise<void> {
  await runAllCleanups();
}

/** Runs `fn` in a fresh bench environment and always tears it down afterwards. */
export async function withBenchEnv<T>(suite: string, fn: (env: BenchEnv) => Promise<T>): Promise<T> {
  try {
    const env = await createBenchEnv(suite);
    return await fn(env);
  } finally {
    await closeBenchEnv();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Timing.

export interface Stats {
  n: number;
  p50: number;
  p95: number;
  min: number;
  max: number;
  mean: number;
  samples: number[];
}

/** Nearest-rank percentile of unsorted samples. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
}

/** Median (the mean of the two middle samples for an even count). */
export function median(samples: number[]): number {
  if (samples.length === 0) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

export function stats(samples: number[]): Stats {
  return {
    n: samples.length,
    p50: median(samples),
    p95: percentile(samples, 95),
    min: Math.min(...samples),
    max: Math.max(...samples),
    mean: samples.reduce((a, b) => a + b, 0) / samples.length,
    samples,
  };
}

export async function timeOnce(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** p50/p95 of `fn` in ms over `iterations` calls, after `warmup` untimed calls. */
export async function measure(fn: () => Promise<unknown>, iterations: number, warmup = 3): Promise<Stats> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) samples.push(await timeOnce(fn));
  return stats(samples);
}

/**
 * Several contenders timed side by side: each iteration calls every contender once, in an order that rotates
 * between iterations (so none always runs first, on a cold cache, or last). Warm-up rounds are not timed.
 */
export async function measureSideBySide<K extends string>(
  contenders: Record<K, () => Promise<unknown>>,
  iterations: number,
  warmup = 3,
): Promise<Record<K, Stats>> {
  const timed = Object.fromEntries(
    (Object.keys(contenders) as K[]).map((k) => [k, () => timeOnce(contenders[k])]),
  ) as Record<K, () => Promise<number>>;
  return measureReportedSideBySide(timed, iterations, warmup);
}

/**
 * As measureSideBySide, for contenders that time themselves: each call returns its own figure in ms (the part of
 * its work the target is about, e.g. a page's navigation to its first useful frame, without the browser context
 * made and closed around it).
 */
export async function measureReportedSideBySide<K extends string>(
  contenders: Record<K, () => Promise<number>>,
  iterations: number,
  warmup = 3,
): Promise<Record<K, Stats>> {
  const keys = Object.keys(contenders) as K[];
  const samples = Object.fromEntries(keys.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let i = 0; i < warmup + iterations; i++) {
    const order = keys.map((_, j) => keys[(i + j) % keys.length]);
    for (const k of order) {
      const ms = await contenders[k]();
      if (i >= warmup) samples[k].push(ms);
    }
  }
  return Object.fromEntries(keys.map((k) => [k, stats(samples[k])])) as Record<K, Stats>;
}

// ---------------------------------------------------------------------------------------------------------------
// Output.

export const fmtMs = (ms: number) =>
  Number.isNaN(ms) ? '-' : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
export const fmtRatio = (r: number) => (Number.isFinite(r) ? `${r >= 10 ? r.toFixed(1) : r.toFixed(2)}×` : '-');
export const fmtInt = (n: number) => n.toLocaleString('en-US');
export const fmtBytes = (n: number) =>
  n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`;

export function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** Prints an aligned text table: numbers (and ratios, PASS/MISS) right-aligned, the rest left-aligned. */
export function printTable(title: string, headers: string[], rows: (string | number)[][], notes: string[] = []): void {
  const cells = rows.map((r) => r.map((c) => (typeof c === 'number' ? String(c) : c)));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const numeric = headers.map(
    (_, i) =>
      cells.length > 0 &&
      cells.every((r) => /^[-+]?[\d.,]+\s*(×|ms|%|s|KiB|MiB|B)?$|^-$|^PASS$|^MISS$/.test(r[i] ?? '')),
  );
  const line = (r: string[]) =>
    '| ' +
    r.map((c, i) => (numeric[i] ? (c ?? '').padStart(widths[i]) : (c ?? '').padEnd(widths[i]))).join(' | ') +
    ' |';
  const sep = '|' + widths.map((w, i) => (numeric[i] ? '-'.repeat(w + 1) + ':' : '-'.repeat(w + 2))).join('|') + '|';
  log('');
  log(`### ${title}`);
  log(line(headers));
  log(sep);
  for (const r of cells) log(line(r));
  for (const n of notes) log(`  ${n}`);
}

/** One line of the final summary: a target from targets.md, the figure measured, and whether it holds. */
export interface TargetResult {
  suite: string;
  target: string;
  measured: string;
  pass: boolean;
  note?: string;
}

export const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS');

/** What GET /admin/v1/invariants found: "no mismatch", or how many and the first three. */
export const mismatchText = (mismatches: string[]) =>
  mismatches.length === 0
    ? 'no mismatch'
    : `${mismatches.length} MISMATCHES, first: ${mismatches.slice(0, 3).join('; ')}`;
