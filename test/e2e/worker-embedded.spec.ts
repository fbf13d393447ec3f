import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { groupAlive } from '../../src/worker/proc';
import { startServer } from '../support/server-process';
import { workerDatabaseUrl } from '../support/test-databases';
import { waitFor } from '../support/runplane-worker';

const ADMIN_TOKEN = 'rp_test_admin_token_embedded_worker_0123';

/**
 * `runplane serve` runs one embedded worker: a submitted run runs to done with nothing else started. It has its own
 * service account whose token is renewed at each start, and it stops (and reports) its jobs when the server stops.
 */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('the embedded worker of runplane serve', () => {
  let dir: string;
  let databaseUrl: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-embedded-worker-'));
    databaseUrl = await workerDatabaseUrl('serveworker');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const env = (over: Record<string, string> = {}) => ({
    DATABASE_URL: databaseUrl,
    DATABASE_EMBEDDED: process.env.RUNPLANE_TEST_EMBEDDED === '1' ? 'true' : 'false',
    RUNPLANE_DATA_DIR: join(dir, 'data'),
    RUNPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    ...over,
  });
  const api = (base: string) => async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies read field by field in the test
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };
  const sql = async <T>(text: string, params: unknown[] = []): Promise<T[]> => {
    const c = new Client({ connectionString: databaseUrl });
    await c.connect();
    try {
      return (await c.query(text, params)).rows as T[];
    } finally {
      await c.end();
    }
  };

  it('runs a submitted job to done, and stops its jobs when the server stops', async () => {
    const server = await startServer(env());
    try {
      await waitFor('the embedded worker', async () =>
        /embedded worker embedded-[0-9a-f]{12} runs jobs/.test(server.output()),
      );
      expect(server.output()).toContain(`work dir ${join(dir, 'worker')}`);
      const call = api(server.url);
      expect((await call('POST', '/api/v1/projects', { name: 'tour' })).status).toBe(201);
      const submitted = await call('POST', '/api/v1/projects/tour/runs', {
        run_name: 'hello',
        jobs: [{ spec: { commands: ['echo hello'], resources: { cpu: 1, memory_mib: 128 } } }],
      });
      expect(submitted.status).toBe(201);
      const done = await waitFor('the run to be done', async () => {
        const r = await call('GET', `/api/v1/projects/tour/runs/${submitted.body.id}`);
        return r.body.status === 'done' && r.body;
      });
      // The newest submission in full: the last of job_submissions (latest_job_submission leaves its documents there).
      const s = done.jobs[0].job_submissions.at(-1);
      expect(s).toMatchObject({ id: done.jobs[0].latest_job_submission.id, status: 'done', exit_status: 0 });
      expect(s.provisioning_data.worker_id).toMatch(/^embedded-[0-9a-f]{12}$/);
      const cost = await call('GET', `/api/v1/projects/tour/runs/${submitted.body.id}/cost`);
      expect(cost.body.total_usd).toBeGreaterThan(0);

      // A job still running when the server is stopped: stopped, reported, retried under the policy.
      const sleeper = await call('POST', '/api/v1/projects/tour/runs', {
        retry: { on_events: ['no_capacity'], max_attempts: 2 },
        jobs: [{ spec: { commands: ['sleep 600'], resources: { cpu: 1, memory_mib: 128 } } }],
      });
      const pgid = await waitFor('the sleeper to run', async () => {
        const r = await call('GET', `/api/v1/projects/tour/runs/${sleeper.body.id}`);
        const latest = r.body.jobs[0].job_submissions.at(-1);
        return latest.status === 'running' && (latest.provisioning_data.pid as number);
      });
      expect(await server.stop('SIGTERM')).toBe(0);
      expect(groupAlive(pgid)).toBe(false);
      const rows = await sql<{ status: string; termination_reason: string }>(
        `SELECT status, termination_reason FROM job_submissions WHERE run_id = $1 ORDER BY submission_num`,
        [sleeper.body.id],
      );
      expect(rows).toEqual([
        { status: 'failed', termination_reason: 'interrupted_by_no_capacity' },
        { status: 'submitted', termination_reason: null },
      ]);
    } finally {
      if (server.child.exitCode === null) await server.stop('SIGKILL');
    }
  }, 90_000);

  it('renews its token at each start (one live token); RUNPLANE_EMBEDDED_WORKER=false turns it off', async () => {
    const again = await startServer(env());
    try {
      await waitFor('the embedded worker', async () => again.output().includes('embedded worker'));
      const [account] = await sql<{ id: string; name: string; global_role: string }>(
        `SELECT id, name, global_role FROM users WHERE name LIKE 'embedded-%'`,
      );
      expect(account.global_role).toBe('service');
      expect(await sql(`SELECT id FROM api_tokens WHERE user_id = $1`, [account.id])).toHaveLength(1);
    } finally {
      expect(await again.stop('SIGTERM')).toBe(0);
    }
    const off = await startServer(env({ RUNPLANE_EMBEDDED_WORKER: 'false' }));
    try {
      await new Promise((r) => setTimeout(r, 500));
      expect(off.output()).not.toContain('embedded worker');
    } finally {
      expect(await off.stop('SIGTERM')).toBe(0);
    }
  }, 90_000);
});
