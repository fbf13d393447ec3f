import { mkdtempSync, rmSync } from 'node:fs';
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
    const created = await fetch(`${first.url}/api/v1/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'kept' }) });
    expect(created.status).toBe(201);

    const second = await runCli({ ...env, PORT: '0' }, ['serve']);
    expect(second.code).toBe(1);
    expect(second.output).toMatch(/is in use by process \d+/);

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
    expect(result.output.trim()).toBe('Invalid configuration: PORT="eighty" must be an integer port');
  });

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
  }, 60_000);
});
