import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitFor } from '../support/runplane-worker';
import { startServer } from '../support/server-process';
import { workerDatabaseUrl } from '../support/test-databases';

/**
 * `runplane serve` reads like a tool on a terminal (LOG_FORMAT=auto there; forced with pretty here, the test's pipes
 * not being one): a few start-up lines and request logs as `METHOD /path → status`; JSON lines otherwise.
 */
describe('the server on a terminal', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-terminal-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const start = async (format: string) =>
    startServer({
      // Its own: the first start on an empty database creates the admin, and cli.spec's server (same jest worker,
      // later) must be that first start for its RUNPLANE_ADMIN_TOKEN to be the admin's.
      DATABASE_URL: await workerDatabaseUrl('terminal'),
      DATABASE_EMBEDDED: process.env.RUNPLANE_TEST_EMBEDDED === '1' ? 'true' : 'false',
      RUNPLANE_DATA_DIR: join(dir, 'data'),
      RUNPLANE_EMBEDDED_WORKER: 'false',
      LOG_LEVEL: 'info',
      LOG_FORMAT: format,
    });

  it('logs readable lines with LOG_FORMAT=pretty, JSON lines with LOG_FORMAT=json', async () => {
    const pretty = await start('pretty');
    try {
      expect((await fetch(`${pretty.url}/api/v1/projects`)).status).toBe(401);
      await waitFor('the request line', async () =>
        /^\d\d:\d\d:\d\d INFO {2}GET \/api\/v1\/projects → 401 \d+ms$/m.test(pretty.output()),
      );
      expect(pretty.output()).toMatch(
        /^runplane: listening on http:\/\/127\.0\.0\.1:\d+ \(PostgreSQL at DATABASE_URL\)$/m,
      );
      expect(pretty.output()).not.toContain('{"level"');
      expect(pretty.output()).not.toContain('Mapped {');
    } finally {
      expect(await pretty.stop('SIGTERM')).toBe(0);
    }
    const json = await start('json');
    try {
      expect((await fetch(`${json.url}/api/v1/projects`)).status).toBe(401);
      await waitFor('the JSON request line', async () =>
        json
          .output()
          .split('\n')
          .some(
            (l) => l.startsWith('{') && (JSON.parse(l) as { res?: { statusCode?: number } }).res?.statusCode === 401,
          ),
      );
    } finally {
      expect(await json.stop('SIGTERM')).toBe(0);
    }
  }, 90_000);
});
