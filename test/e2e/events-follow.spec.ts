import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Claimed, DONE, httpPost, ReferenceWorker } from '../../bench/reference-worker';
import { jobSpec } from '../support/factories';
import { startServer, ServerProcess } from '../support/server-process';
import { ReceivedEvent, SseClient } from '../support/sse';
import { createTestApp, describeRealPostgres, TestApp, TestUser, uniqueName } from '../support/test-app';
import { workerDatabaseUrl } from '../support/test-databases';
import { required } from '../../src/common/required';

/* eslint-disable @typescript-eslint/no-explicit-any */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** JSON over fetch, as any client of the API. */
async function api(base: string, token: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Every event of a project's feed after `cursor`, through the keyset pages of one instance. */
async function keysetRead(base: string, token: string, project: string, cursor: string): Promise<any[]> {
  const items: any[] = [];
  let next = cursor;
  for (;;) {
    const page = await api(base, token, 'GET', `/api/v1/projects/${project}/events?limit=100&cursor=${next}`);
    items.push(...page.items);
    next = page.next_cursor;
    if (page.items.length < 100) return items;
  }
}

const quantile = (xs: number[], q: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

describeRealPostgres('the event feed followed across instances on one PostgreSQL', () => {
  let t: TestApp;
  let a: ServerProcess;
  let b: ServerProcess;
  let owner: TestUser;
  let service: TestUser;
  beforeAll(async () => {
    // Users straight into the test's own database; two server processes on it, background loops on in both.
    t = await createTestApp({}, { ownDatabase: 'follow' });
    [owner, service] = await Promise.all([t.user(), t.user('service')]);
    const env = { DATABASE_URL: await workerDatabaseUrl('follow'), RUNPLANE_BACKGROUND_LOOPS: 'true' };
    [a, b] = await Promise.all([startServer(env), startServer(env)]);
  }, 90_000);
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await t?.close();
  });

  it('a follower on A gets every event written through B once, in order; reconnects lose, repeat nothing', async () => {
    const onB = (method: string, path: string, body?: unknown) => api(b.url, owner.token, method, path, body);
    const project = (await onB('POST', '/api/v1/projects', { name: uniqueName('follow') })).name as string;
    const feed = (base: string) => `${base}/api/v1/projects/${project}/events`;

    const follower = await SseClient.open(feed(a.url), owner.token);
    expect(follower.status).toBe(200);
    await follower.until(() => follower.lastId !== undefined, 10_000, 'the start position');
    const start = required(follower.lastId, 'the last event id');

    // 1,000 jobs run to the end by 4 workers at once, through B.
    const started = Date.now();
    const run = await onB('POST', `/api/v1/projects/${project}/runs`, {
      jobs: [{ spec: jobSpec(), replicas: 1000 }],
    });
    const completedAt = new Map<string, number>();
    const workers = [0, 1, 2, 3].map((i) => new ReferenceWorker(httpPost(b.url, service.token), `follow-w${i}`));
    await Promise.all(
      workers.map(async (w) => {
        for (;;) {
          const claimed: Claimed[] = await w.claim(25);
          if (claimed.length === 0) return;
          for (const s of claimed) {
            expect((await w.running(s.id)).status).toBe(200);
            expect((await w.complete(s.id, DONE)).status).toBe(200);
            completedAt.set(s.job_id, Date.now());
          }
        }
      }),
    );
    expect(completedAt.size).toBe(1000);
    const written = Date.now() - started;
    // A group cancel and a run stop (its queued jobs are swept by the leader's loop: no events for them).
    const other = await onB('POST', `/api/v1/projects/${project}/runs`, {
      job_groups: [{ ref: 'g' }],
      jobs: [
        { group_ref: 'g', replicas: 50, spec: jobSpec() },
        { replicas: 5, spec: jobSpec() },
      ],
    });
    const g = other.jobs.find((j: any) => j.job_group_id !== 0).job_group_id;
    await onB('POST', `/api/v1/projects/${project}/runs/${other.id}/job-groups/${g}/cancel`, {});
    await onB('POST', `/api/v1/projects/${project}/runs/${other.id}/stop`, {});

    // Every write has committed: the follower gets exactly what a keyset read (on B) returns, in the same order. A
    // read returns a prefix of the feed (events behind a transaction still open, on any connection, wait), so the
    // feed has settled once a read holds the last writes' events (both cancellations, every job done) and the next
    // read adds nothing.
    const holdsEverything = (events: any[]) =>
      events.filter((e) => e.type === 'group.cancelled').length === 2 &&
      events.filter((e) => e.type === 'job.status' && e.status === 'done').length === 1000;
    let full: any[] = [];
    for (let round = 0; ; round++) {
      full = await keysetRead(b.url, owner.token, project, start);
      if (holdsEverything(full)) {
        await follower.until(() => follower.events.length >= full.length, 60_000, `${full.length} events`);
        if ((await keysetRead(b.url, owner.token, project, start)).length === full.length) break;
      }
      if (round > 100) throw new Error('the feed never settled');
      await sleep(100);
    }
    await sleep(1000); // nothing more may come
    const data = follower.events.map((e) => e.data);
    expect(data).toEqual(full);
    expect(new Set(data.map((e) => e.seq)).size).toBe(data.length);
    expect(new Set(follower.events.map((e) => e.id)).size).toBe(data.length);
    const count = (type: string, status: string) => data.filter((e) => e.type === type && e.status === status).length;
    for (const status of ['provisioning', 'running', 'done']) expect(count('job.status', status)).toBe(1000);
    expect(count('group.cancelled', 'cancelled')).toBe(2);
    // The run's status: submitted, then provisioning and running as its jobs come and go (each a change), then done.
    // Between two claims nothing may be on a worker while jobs are still queued: the run shows submitted again then
    // (its most advanced activity; seen through a slow pooler).
    const statuses = data.filter((e) => e.run_id === run.id && e.type === 'run.status').map((e) => e.status);
    expect(statuses[0]).toBe('submitted');
    expect(statuses[statuses.length - 1]).toBe('done');
    const between = new Set(statuses.slice(1, -1));
    expect([...between].filter((s) => !['submitted', 'provisioning', 'running'].includes(s))).toEqual([]);
    expect(between.has('provisioning') && between.has('running')).toBe(true);
    expect(statuses.every((s, i) => i === 0 || s !== statuses[i - 1])).toBe(true);
    expect(data.filter((e) => e.run_id === other.id).map((e) => `${e.type} ${e.status} ${e.reason}`)).toEqual([
      'run.status submitted null',
      'group.cancelled cancelled job_group_cancelled',
      'group.cancelled cancelled stopped_by_user',
      'run.status terminated stopped_by_user',
    ]);

    // Figures. Delay = when the follower got an event − its `at` (the start of the writing transaction, on this
    // machine's clock, as the test's): an upper bound of commit-to-delivery (it includes the transaction itself).
    // For the 1,000 completions, also − the moment the worker got B's answer (sent after the commit): a lower bound.
    const delays = follower.events.map((e) => e.receivedAt - Date.parse(e.data.at));
    const afterAnswer = follower.events
      .filter((e) => e.data.type === 'job.status' && e.data.status === 'done')
      .map((e) => e.receivedAt - required(completedAt.get(e.data.job_id), 'completion time'));
    process.stdout.write(
      `events-follow: ${data.length} events delivered once each, in order (${count('job.status', 'done')} ` +
        `completions written through B in ${(written / 1000).toFixed(1)} s by 4 workers, followed on A); delay from ` +
        `the transaction's start to the follower: median ${quantile(delays, 0.5)} ms, p95 ${quantile(delays, 0.95)} ` +
        `ms, max ${Math.max(...delays)} ms (the 1,000-job submission's own transaction); from the worker's answer ` +
        `(after commit): median ` +
        `${quantile(afterAnswer, 0.5)} ms, p95 ${quantile(afterAnswer, 0.95)} ms, max ${Math.max(...afterAnswer)} ms\n`,
    );

    // Reconnections with Last-Event-ID after the 1st, the 500th and the last event, on either instance: the rest,
    // exactly. (After the 500th, the header wins over the URL's older cursor, as when EventSource reconnects.)
    const resume = async (base: string, after: ReceivedEvent, query = ''): Promise<SseClient> => {
      const c = await SseClient.open(`${feed(base)}${query}`, owner.token, { 'Last-Event-ID': after.id });
      expect(c.status).toBe(200);
      return c;
    };
    const expectRest = async (c: SseClient, k: number) => {
      await c.until(() => c.events.length >= full.length - k, 30_000, `${full.length - k} events`);
      await sleep(500);
      expect(c.events.map((e) => e.data)).toEqual(full.slice(k));
      c.close();
    };
    await expectRest(await resume(b.url, follower.events[0]), 1);
    await expectRest(await resume(a.url, follower.events[499], `?cursor=${start}`), 500);
    const atEnd = await resume(a.url, follower.events[full.length - 1]);
    await sleep(1500);
    expect(atEnd.events).toEqual([]);
    // Live again: the next event reaches both followers, once.
    const third = await onB('POST', `/api/v1/projects/${project}/runs`, { jobs: [{ spec: jobSpec() }] });
    await atEnd.until(() => atEnd.events.length >= 1, 10_000);
    await follower.until(() => follower.events.length > full.length, 10_000);
    await sleep(500);
    expect(atEnd.events.map((e) => e.data)).toEqual([
      expect.objectContaining({ run_id: third.id, seq: expect.any(Number) }),
    ]);
    expect(follower.events.slice(full.length).map((e) => e.data)).toEqual(atEnd.events.map((e) => e.data));
    expect(await keysetRead(b.url, owner.token, project, follower.events[full.length - 1].id)).toEqual(
      atEnd.events.map((e) => e.data),
    );
    atEnd.close();

    // A stops with a follower still open: the stream ends and the process exits cleanly.
    const stopping = Date.now();
    expect(await a.stop('SIGTERM')).toBe(0);
    await follower.ending(5000);
    expect(Date.now() - stopping).toBeLessThan(5000);
  }, 240_000);
});

describe('the event feed on the embedded database (no LISTEN there: followers poll)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-events-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a follower gets every event, in the order a keyset read gives', async () => {
    const adminToken = 'rp_test_admin_token_events_0123456789';
    const server = await startServer({ RUNPLANE_DATA_DIR: join(dir, 'data'), RUNPLANE_ADMIN_TOKEN: adminToken });
    try {
      const call = (method: string, path: string, body?: unknown) => api(server.url, adminToken, method, path, body);
      const service = await call('POST', '/api/v1/users', { name: uniqueName('svc'), global_role: 'service' });
      const project = (await call('POST', '/api/v1/projects', { name: uniqueName('embedded') })).name;
      const follower = await SseClient.open(`${server.url}/api/v1/projects/${project}/events`, adminToken);
      expect(follower.status).toBe(200);
      await follower.until(() => follower.lastId !== undefined, 10_000, 'the start position');
      const start = required(follower.lastId, 'the last event id');
      const run = await call('POST', `/api/v1/projects/${project}/runs`, { jobs: [{ spec: jobSpec(), replicas: 3 }] });
      const w = new ReferenceWorker(httpPost(server.url, service.token), 'embedded-w');
      for (const s of await w.claim(3)) await w.execute(s, DONE);
      const full = await keysetRead(server.url, adminToken, project, start);
      expect(full.filter((e) => e.type === 'job.status' && e.status === 'done')).toHaveLength(3);
      expect(full[full.length - 1]).toMatchObject({ type: 'run.status', status: 'done', run_id: run.id });
      await follower.until(() => follower.events.length >= full.length, 10_000, `${full.length} events`);
      await sleep(500);
      expect(follower.events.map((e) => e.data)).toEqual(full);
      expect(await server.stop('SIGTERM')).toBe(0);
      await follower.ending(5000);
    } finally {
      if (server.child.exitCode === null) await server.stop('SIGKILL');
    }
  }, 120_000);
});
