import { ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';

/**
 * Real infrastructure for the multi-instance tests and benches, started and stopped here, never by `npm start`:
 * PostgreSQL clusters of their own (initdb on a free port: restarting one disturbs no other test), a hot standby
 * made with pg_basebackup, and PgBouncer (Debian's package) in front of any of them. Server binaries run as the
 * `postgres` user when we are root (initdb and pgbouncer refuse root).
 */

const run = promisify(execFile);
const PG_VERSION = process.env.RUNPLANE_TEST_PG_VERSION ?? '15';
const PG_BIN = process.env.RUNPLANE_TEST_PG_BIN ?? `/usr/lib/postgresql/${PG_VERSION}/bin`;
const PGBOUNCER = process.env.RUNPLANE_TEST_PGBOUNCER_BIN ?? '/usr/sbin/pgbouncer';
const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

function asPostgres(cmd: string, args: string[]): [string, string[]] {
  return asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
}

async function exec(cmd: string, args: string[]): Promise<string> {
  const [c, a] = asPostgres(cmd, args);
  try {
    const { stdout, stderr } = await run(c, a, { maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A directory the postgres user can write. */
function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(dir, 0o777);
  return dir;
}

export const pgUrl = (port: number, database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;

export async function waitForPostgres(url: string, timeoutMs = 30_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const c = new Client({ connectionString: url, connectionTimeoutMillis: 2000 });
    c.on('error', () => undefined);
    try {
      await c.connect();
      await c.query('SELECT 1');
      return;
    } catch (err) {
      if (Date.now() > until) throw err;
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      await c.end().catch(() => undefined);
    }
  }
}

export class PostgresCluster {
  private constructor(
    readonly dataDir: string,
    readonly port: number,
    private readonly root: string,
  ) {}

  /** The version line of the server binaries (for reports). */
  static async version(): Promise<string> {
    return (await exec(join(PG_BIN, 'postgres'), ['--version'])).trim();
  }

  /** initdb a new cluster on a free port (trust auth, no fsync: test data) and start it. */
  static async create(name = 'primary'): Promise<PostgresCluster> {
    const root = scratchDir(`runplane-pg-${name}-`);
    const dataDir = join(root, 'data');
    await exec(join(PG_BIN, 'initdb'), ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    const port = await freePort();
    writeFileSync(
      join(root, 'extra.conf'),
      [
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = '${root}'`,
        'fsync = off',
        'full_page_writes = off',
        'synchronous_commit = off',
        'wal_level = replica',
        'max_wal_senders = 5',
        'hot_standby = on',
        'max_connections = 200',
        'shared_buffers = 64MB',
        `timezone = 'UTC'`,
      ].join('\n') + '\n',
    );
    await exec('sh', ['-c', `echo "include '${join(root, 'extra.conf')}'" >> ${join(dataDir, 'postgresql.conf')}`]);
    await exec('sh', ['-c', `echo "host replication all 127.0.0.1/32 trust" >> ${join(dataDir, 'pg_hba.conf')}`]);
    const cluster = new PostgresCluster(dataDir, port, root);
    await cluster.start();
    return cluster;
  }

  /** A hot standby of `primary` made with pg_basebackup (streaming, with a replication slot), on a port of its own. */
  static async standbyOf(primary: PostgresCluster): Promise<PostgresCluster> {
    const root = scratchDir('runplane-pg-standby-');
    const dataDir = join(root, 'data');
    const port = await freePort();
    await exec(join(PG_BIN, 'pg_basebackup'), [
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      'postgres',
      '-D',
      dataDir,
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
    ]);
    // The copy includes the primary's settings file by its absolute path: give the standby its own port and socket.
    const conf = join(dataDir, 'postgresql.conf');
    const [from, to] = [join(primary.root, 'extra.conf'), join(root, 'extra.conf')];
    await exec('sh', ['-c', `sed -i "s#include '${from}'#include '${to}'#" ${conf}`]);
    writeFileSync(
      join(root, 'extra.conf'),
      [
        `port = ${port}`,
        `listen_addresses = '127.0.0.1'`,
        `unix_socket_directories = '${root}'`,
        'fsync = off',
        'hot_standby = on',
        'hot_standby_feedback = on',
        'max_connections = 200',
        'shared_buffers = 64MB',
        `timezone = 'UTC'`,
      ].join('\n') + '\n',
    );
    const standby = new PostgresCluster(dataDir, port, root);
    await standby.start();
    return standby;
  }

  url(database = 'postgres'): string {
    return pgUrl(this.port, database);
  }

  async start(): Promise<void> {
    await exec(join(PG_BIN, 'pg_ctl'), ['-D', this.dataDir, '-l', join(this.root, 'log'), '-w', '-t', '60', 'start']);
    await waitForPostgres(this.url());
  }

  /** `pg_ctl restart -m fast` (what `pg_ctlcluster restart` does): every session is ended, then the server is back. */
  async restart(): Promise<void> {
    const log = join(this.root, 'log');
    await exec(join(PG_BIN, 'pg_ctl'), ['-D', this.dataDir, '-l', log, '-w', '-m', 'fast', 'restart']);
  }

  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await exec(join(PG_BIN, 'pg_ctl'), ['-D', this.dataDir, '-w', '-m', mode, 'stop']).catch(() => undefined);
  }

  /** Stops the server and removes its files. */
  async destroy(): Promise<void> {
    await this.stop('immediate');
    rmSync(this.root, { recursive: true, force: true });
  }
}

export type PoolMode = 'transaction' | 'session';

/**
 * PgBouncer in front of a PostgreSQL server, every database name passed through. Debian 12's PgBouncer 1.18 refuses
 * unknown startup parameters: pg's `options` (runplane's timezone=UTC, jit=off, plan_cache_mode) are ignored here and
 * set per server connection instead, with the database entry's timezone and connect_query.
 */
export class PgBouncer {
  private constructor(
    readonly port: number,
    readonly mode: PoolMode,
    private readonly child: ChildProcess,
    private readonly root: string,
    private readonly output: () => string,
  ) {}

  static async version(): Promise<string> {
    return (await exec(PGBOUNCER, ['--version'])).split('\n')[0].trim();
  }

  static async start(target: { host?: string; port: number }, mode: PoolMode, poolSize = 20): Promise<PgBouncer> {
    const root = scratchDir(`runplane-pgbouncer-${mode}-`);
    const port = await freePort();
    writeFileSync(join(root, 'userlist.txt'), '"postgres" ""\n');
    writeFileSync(
      join(root, 'pgbouncer.ini'),
      [
        '[databases]',
        `* = host=${target.host ?? '127.0.0.1'} port=${target.port} timezone=UTC ` +
          `connect_query='SET jit = off; SET plan_cache_mode = force_generic_plan'`,
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        'unix_socket_dir =',
        'auth_type = trust',
        `auth_file = ${join(root, 'userlist.txt')}`,
        `pool_mode = ${mode}`,
        'max_client_conn = 1000',
        `default_pool_size = ${poolSize}`,
        'max_db_connections = 0',
        'ignore_startup_parameters = extra_float_digits,options',
        'server_check_delay = 0',
        'server_login_retry = 1',
        'admin_users = postgres',
        `max_user_connections = ${process.env.RUNPLANE_TEST_PGBOUNCER_MAX_SERVER_CONNECTIONS ?? 60}`,
        `pidfile = ${join(root, 'pgbouncer.pid')}`,
      ].join('\n') + '\n',
    );
    const [cmd, args] = asPostgres(PGBOUNCER, [join(root, 'pgbouncer.ini')]);
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stderr?.on('data', (d) => (out += d));
    const bouncer = new PgBouncer(port, mode, child, root, () => out);
    try {
      await waitForPostgres(bouncer.url(), 15_000);
    } catch (err) {
      await bouncer.stop();
      throw new Error(`pgbouncer did not start: ${(err as Error).message}\n${out}`);
    }
    return bouncer;
  }

  url(database = 'postgres'): string {
    return pgUrl(this.port, database);
  }

  /** The database URL `url` (on the server behind) as seen through this PgBouncer. */
  through(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  log(): string {
    return this.output();
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      const exited = new Promise((r) => this.child.once('exit', r));
      // runuser does not pass signals on: signal PgBouncer itself (SIGINT: shut down at once).
      try {
        process.kill(Number(readFileSync(join(this.root, 'pgbouncer.pid'), 'utf8').trim()), 'SIGINT');
      } catch {
        this.child.kill('SIGKILL');
      }
      await exited;
    }
    rmSync(this.root, { recursive: true, force: true });
  }
}
