import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, startServer } from '../support/server-process';

const ADMIN_TOKEN = 'rp_test_admin_token_0123456789abcdef';

/** The default set-up: no DATABASE_URL, an embedded PostgreSQL in a data directory, as a real process. */
describe('the server on its embedded database', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-embedded-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('starts with no configuration, keeps data across a restart, and locks its data directory', async () => {
    const dataDir = join(dir, 'data');
    const env = { RUNPLANE_DATA_DIR: dataDir, RUNPLANE_ADMIN_TOKEN: ADMIN_TOKEN };
    const auth = { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' };

    const first = await startServer(env);
    expect(first.output()).toContain('created the first admin user "admin"');
    expect(first.output()).not.toContain(ADMIN_TOKEN);
    expect(await (await fetch(`${first.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    const created = await fetch(`${first.url}/api/v1/projects`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'kept' }),
    });
    expect(created.status).toBe(201);

    const second = await runCli({ ...env, PORT: '0' }, ['serve']);
    expect(second.code).toBe(1);
    // One line, saying what is wrong and what to do: no start-up log, no stack.
    expect(second.output).toMatch(
      /^runplane: Data directory \S+ is in use by process \d+ \(lock file \S+\): stop that server \(or command\), or set RUNPLANE_DATA_DIR to another directory\n$/,
    );
    expect(second.stderr).toBe(second.output);

    expect(await first.stop('SIGTERM')).toBe(0);

    const again = await startServer({ RUNPLANE_DATA_DIR: dataDir });
    try {
      expect(again.output()).not.toContain('created the first admin');
      const got = await fetch(`${again.url}/api/v1/projects/kept`, { headers: auth });
      expect(got.status).toBe(200);
      expect(((await got.json()) as { name: string }).name).toBe('kept');
    } finally {
      expect(await again.stop('SIGINT')).toBe(0);
    }
  }, 120_000);

  it('refuses bad configuration with one line naming the variable, before touching the data directory', async () => {
    const result = await runCli({ RUNPLANE_DATA_DIR: join(dir, 'never'), PORT: 'eighty' }, ['serve']);
    expect(result.code).toBe(1);
    expect(result.output).toBe(
      'runplane: Invalid configuration: PORT="eighty" must be an integer port; fix it and start again (the README ' +
        'lists every variable)\n',
    );
  });

  it('refuses a port in use with one line, and leaves its data directory unlocked', async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    try {
      const dataDir = join(dir, 'port');
      const result = await runCli({ RUNPLANE_DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info' }, ['serve']);
      expect(result.code).toBe(1);
      // The first admin's token line (written before listening) may come first; the rest is the one line.
      expect(result.stderr).toBe(
        `runplane: cannot listen on 127.0.0.1:${port}: the port is already in use; stop what listens there, or set ` +
          `PORT to a free port (0 picks one)\n`,
      );
      expect(result.output).not.toMatch(/"level"|EADDRINUSE|\n\s+at /);
      expect(existsSync(`${dataDir}.lock`)).toBe(false);
    } finally {
      taken.close();
    }
  }, 60_000);

  it('refuses an unreachable DATABASE_URL with one line, without showing the password', async () => {
    const closed: Server = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await runCli({ DATABASE_URL: `postgres://runplane:s3cret@127.0.0.1:${port}/runplane`, PORT: '0' }, [
      'serve',
    ]);
    expect(result.code).toBe(1);
    expect(result.output).toBe(
      `runplane: cannot connect to the PostgreSQL server at DATABASE_URL (127.0.0.1:${port}/runplane): connect ` +
        `ECONNREFUSED 127.0.0.1:${port}; check that the server runs and accepts this user and database\n`,
    );
  }, 60_000);

  it('migrates and creates admins from the CLI', async () => {
    const env = { RUNPLANE_DATA_DIR: join(dir, 'cli') };
    const migrated = await runCli(env, ['migrate']);
    expect(migrated.code).toBe(0);
    expect(migrated.output).toContain('applied: CreateUsersAndProjects');
    expect((await runCli(env, ['migrate'])).output).toContain('schema is up to date');
    const admin = await runCli(env, ['create-admin', 'ops']);
    expect(admin.code).toBe(0);
    expect(admin.output).toMatch(/created admin ops\ntoken: rp_\S+/);
    const rate = await runCli(env, ['set-rate', 'cpu', '0.05']);
    expect(rate.code).toBe(0);
    expect(rate.output).toMatch(/^cpu v2: 0\.05 USD per \S+-hour/);
    expect((await runCli(env, ['set-rate', 'cpu', 'free'])).code).toBe(2);
    // Only a resource a requestable key maps to can have a rate (anything else could never be billed).
    const unbillable = await runCli(env, ['set-rate', 'tape', '0.01', 'GiB-hour']);
    expect(unbillable.code).toBe(1);
    expect(unbillable.output).toMatch(/^runplane: set-rate failed: name is not a billed resource/);
  }, 150_000); // five embedded starts: 10 s each on a busy 2-core machine
});
