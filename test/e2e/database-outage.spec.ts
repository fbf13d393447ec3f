import { Client } from 'pg';
import { QueryFailedError } from 'typeorm';
import { UsersRepository } from '../../src/modules/users/users.repository';
import type { Response } from 'supertest';
import { DatabaseProxy } from '../support/database-proxy';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, describeRealPostgres, TestApp, TestUser } from '../support/test-app';
import { templateName, urlFor, withAdminClient, workerDatabaseUrl } from '../support/test-databases';
import { invariants } from '../support/workers';
import { required } from '../../src/common/required';

interface Answer {
  what: string;
  status: number;
  code?: string;
  retryAfter?: string;
}

const answer = (what: string, res: Response): Answer => ({
  what,
  status: res.status,
  code: res.body?.code,
  retryAfter: res.headers['retry-after'],
});
const isOk = (a: Answer) => a.status >= 200 && a.status < 300;
const isUnavailable = (a: Answer) => a.status === 503 && a.code === 'DATABASE_UNAVAILABLE' && a.retryAfter === '1';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Actors {
  owner: TestUser;
  service: TestUser;
  admin: TestUser;
  project: string;
}

async function actors(t: TestApp): Promise<Actors> {
  const owner = await t.user();
  return {
    owner,
    service: await t.user('service'),
    admin: await t.user('admin'),
    project: (await makeProject(t, owner)).name,
  };
}

/**
 * Reads and writes from several concurrent clients (submits, lists, run views, a worker claiming, reporting
 * running and completing) for `ms`, while `disrupt` runs every `everyMs`. Returns every answer.
 */
async function underLoad(
  t: TestApp,
  a: Actors,
  ms: number,
  everyMs: number,
  disrupt: () => Promise<void>,
): Promise<Answer[]> {
  const answers: Answer[] = [];
  const stopAt = Date.now() + ms;
  const runIds: string[] = [(await makeRun(t, a.owner, a.project)).id];
  const runs = `/api/v1/projects/${a.project}/runs`;
  const loop = async (step: () => Promise<void>) => {
    while (Date.now() < stopAt) await step();
  };
  const submitter = () =>
    loop(async () => {
      const res = await t.http
        .post(runs)
        .set(a.owner.auth)
        .send({ jobs: [{ spec: jobSpec(), replicas: 2 }] });
      answers.push(answer('submit', res));
      if (res.status === 201) runIds.push(res.body.id);
    });
  const lister = () =>
    loop(async () => {
      answers.push(answer('list', await t.http.get(`${runs}?limit=20`).set(a.owner.auth)));
      const id = runIds[Math.floor(Math.random() * runIds.length)];
      answers.push(answer('get', await t.http.get(`${runs}/${id}`).set(a.owner.auth)));
    });
  const worker = () =>
    loop(async () => {
      const post = (path: string, body: object) =>
        t.http.post(`/internal/v1/submissions${path}`).set(a.service.auth).send(body);
      const claimed = await post('/claim', {
        worker_id: 'w-outage',
        capacity: { cpu: 64, memory_mib: 65536, gpu: 0 },
        limit: 2,
      });
      answers.push(answer('claim', claimed));
      if (claimed.status !== 200) return;
      for (const s of claimed.body.submissions as { id: string }[]) {
        const running = await post(`/${s.id}/running`, { worker_id: 'w-outage', provisioning_data: {} });
        answers.push(answer('running', running));
        if (running.status !== 200) continue;
        const done = await post(`/${s.id}/complete`, {
          worker_id: 'w-outage',
          status: 'done',
          termination_reason: 'done_by_runner',
          exit_status: 0,
        });
        answers.push(answer('complete', done));
      }
      if (claimed.body.submissions.length === 0) await sleep(20);
    });
  const disruptor = () =>
    loop(async () => {
      await sleep(everyMs);
      await disrupt();
    });
  await Promise.all([submitter(), submitter(), lister(), lister(), worker(), worker(), disruptor()]);
  return answers;
}

function summary(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) {
    const key = `${a.what} ${a.status}${a.code ? ` ${a.code}` : ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

async function eventuallyReady(t: TestApp): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await t.http.get('/readyz')).status === 200) return;
    await sleep(100);
  }
  throw new Error('/readyz never came back');
}

/** After the trouble: everything works, and the counters agree with the rows. */
async function servesNormally(t: TestApp, a: Actors): Promise<void> {
  await eventuallyReady(t);
  const run = await makeRun(t, a.owner, a.project);
  await t.http.get(`/api/v1/projects/${a.project}/runs?limit=5`).set(a.owner.auth).expect(200);
  await t.http.get(`/api/v1/projects/${a.project}/runs/${run.id}`).set(a.owner.auth).expect(200);
  await t.http
    .post('/internal/v1/submissions/claim')
    .set(a.service.auth)
    .send({ worker_id: 'w-after', capacity: { cpu: 64, memory_mib: 65536, gpu: 0 }, limit: 5 })
    .expect(200);
  expect(await invariants(t, a.admin)).toMatchObject({ ok: true });
}

describe('the database going away', () => {
  let proxy: DatabaseProxy;
  let t: TestApp;
  let a: Actors;
  beforeAll(async () => {
    proxy = await DatabaseProxy.start(await workerDatabaseUrl('outage'));
    t = await createTestApp({ DATABASE_URL: proxy.url }, { ownDatabase: 'outage' });
    a = await actors(t);
  });
  afterAll(async () => {
    await t.close();
    await proxy.close();
  });
  afterEach(() => proxy.restore());

  it('/readyz is 503 DATABASE_UNAVAILABLE at once while connections are refused, /healthz 200; both heal', async () => {
    await t.http.get('/readyz').expect(200);
    await proxy.refuse();
    const started = Date.now();
    const ready = await t.http.get('/readyz');
    expect(Date.now() - started).toBeLessThan(2500);
    expect(ready.status).toBe(503);
    expect(ready.headers['retry-after']).toBe('1');
    expect(ready.body).toMatchObject({ status_code: 503, code: 'DATABASE_UNAVAILABLE' });
    expect(ready.body.details).toEqual(
      expect.arrayContaining([expect.objectContaining({ check: 'database', status: 'down' })]),
    );
    await t.http.get('/healthz').expect(200);
    // An API read and a write (the token is cached, so the guard lets them through to the database).
    const read = await t.http.get(`/api/v1/projects/${a.project}/runs`).set(a.owner.auth);
    expect(isUnavailable(answer('list', read))).toBe(true);
    const write = await t.http
      .post(`/api/v1/projects/${a.project}/runs`)
      .set(a.owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] });
    expect(isUnavailable(answer('submit', write))).toBe(true);
    expect(write.body).toEqual({
      status_code: 503,
      code: 'DATABASE_UNAVAILABLE',
      message: expect.any(String),
      details: [],
    });

    await proxy.restore();
    await servesNormally(t, a);
  });

  it('/readyz answers 503 within its timeout while the database hangs, instead of hanging too', async () => {
    await t.http.get('/readyz').expect(200);
    proxy.hang();
    const started = Date.now();
    const ready = await t.http.get('/readyz');
    const took = Date.now() - started;
    expect(ready.status).toBe(503);
    expect(ready.body.code).toBe('DATABASE_UNAVAILABLE');
    expect(took).toBeLessThan(3500);
    await t.http.get('/healthz').expect(200);
    await proxy.restore();
    await servesNormally(t, a);
  });

  it('connections cut again and again under load: every answer 2xx or 503 (with Retry-After), never 500', async () => {
    let cuts = 0;
    const answers = await underLoad(t, a, 4000, 250, async () => {
      proxy.cut();
      cuts++;
    });
    const bad = answers.filter((x) => !isOk(x) && !isUnavailable(x));
    expect({ bad: bad.slice(0, 10), counts: summary(answers) }).toMatchObject({ bad: [] });
    expect(cuts).toBeGreaterThan(10);
    // It kept serving between cuts (how much depends on the machine).
    expect(answers.filter(isOk).length).toBeGreaterThan(0);
    process.stdout.write(`connections cut ${cuts} times; answers ${JSON.stringify(summary(answers))}\n`);
    await servesNormally(t, a);
  }, 60_000);
});

describeRealPostgres('pg_terminate_backend on the app connections (real PostgreSQL)', () => {
  let t: TestApp;
  let a: Actors;
  let killer: Client;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'outage' });
    a = await actors(t);
    killer = new Client({
      connectionString: await workerDatabaseUrl('outage'),
      application_name: 'runplane-test-killer',
    });
    await killer.connect();
  });
  afterAll(async () => {
    await killer.end();
    await t.close();
  });

  it('every answer 2xx or 503 (with Retry-After), never 500, and the app serves normally afterwards', async () => {
    let terminated = 0;
    const answers = await underLoad(t, a, 5000, 200, async () => {
      const { rows } = await killer.query<{ n: number }>(
        `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'runplane' AND pid <> pg_backend_pid()`,
      );
      terminated += rows[0].n;
    });
    const bad = answers.filter((x) => !isOk(x) && !isUnavailable(x));
    expect({ bad: bad.slice(0, 10), counts: summary(answers) }).toMatchObject({ bad: [] });
    expect(terminated).toBeGreaterThan(10);
    expect(answers.filter(isOk).length).toBeGreaterThan(0);
    process.stdout.write(
      `pg_terminate_backend: ${terminated} backends terminated; answers ${JSON.stringify(summary(answers))}\n`,
    );
    // Transactions that died before COMMIT were run again (the metric counts them by SQLSTATE).
    const metrics = (await t.http.get('/metrics').expect(200)).text;
    expect(metrics).toMatch(/runplane_transaction_retries_total\{sqlstate="(57P01|connection)"\} [1-9]/);
    await servesNormally(t, a);
  }, 60_000);
});

describeRealPostgres('the background loops leader losing its connection (real PostgreSQL)', () => {
  let t: TestApp;
  let admin: Client;
  const LEADER_LOCK_OBJID = 0x72706c70;
  const leaderPid = async () =>
    (
      await admin.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND granted
            AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [LEADER_LOCK_OBJID],
      )
    ).rows[0]?.pid;
  const eventually = async <T>(probe: () => Promise<T | undefined>): Promise<T | undefined> => {
    for (let i = 0; i < 60; i++) {
      const got = await probe();
      if (got !== undefined) return got;
      await sleep(100);
    }
    return undefined;
  };
  beforeAll(async () => {
    t = await createTestApp({ RUNPLANE_BACKGROUND_LOOPS: 'true' }, { ownDatabase: 'outage' });
    admin = new Client({
      connectionString: await workerDatabaseUrl('outage'),
      application_name: 'runplane-test-admin',
    });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.end();
    await t.close();
  });

  it('takes the leader lock again on a new session when the session holding it is terminated', async () => {
    const first = await eventually(leaderPid);
    expect(first).toBeDefined();
    await admin.query('SELECT pg_terminate_backend($1, 5000)', [first]);
    const second = await eventually(async () => {
      const pid = await leaderPid();
      return pid !== undefined && pid !== first ? pid : undefined;
    });
    expect(second).toBeDefined();
  });
});

/**
 * One lost connection, injected at a repository read (a connection can't be made to die at an exact statement
 * through the pool): GET handlers and the token lookup run once more and succeed; a second loss is a 503.
 */
describe('a read whose connection was lost', () => {
  let t: TestApp;
  const lost = () => new QueryFailedError('SELECT ...', [], new Error('Connection terminated unexpectedly'));
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());
  afterEach(() => jest.restoreAllMocks());

  it('a GET handler runs once more on a new connection', async () => {
    const user = await t.user();
    const read = jest.spyOn(UsersRepository.prototype, 'findByIds').mockRejectedValueOnce(lost());
    const res = await t.http.get('/api/v1/users/me').set(user.auth).expect(200);
    expect(res.body.name).toBe(user.name);
    expect(read).toHaveBeenCalledTimes(2);
  });

  it('the token lookup in the guard runs once more', async () => {
    const user = await t.user();
    const lookup = jest.spyOn(UsersRepository.prototype, 'findByTokenHash').mockRejectedValueOnce(lost());
    await t.http.get('/api/v1/users/me').set(user.auth).expect(200);
    expect(lookup).toHaveBeenCalledTimes(2);
  });

  it('a second loss in a row answers 503 DATABASE_UNAVAILABLE with Retry-After, after exactly two tries', async () => {
    const user = await t.user();
    const read = jest
      .spyOn(UsersRepository.prototype, 'findByIds')
      .mockRejectedValueOnce(lost())
      .mockRejectedValueOnce(lost());
    const res = await t.http.get('/api/v1/users/me').set(user.auth);
    expect(isUnavailable(answer('me', res))).toBe(true);
    expect(read).toHaveBeenCalledTimes(2);
  });
});

describeRealPostgres('the database dropped under the app (real PostgreSQL)', () => {
  it('/readyz and the API answer 503 DATABASE_UNAVAILABLE at once, /healthz stays 200', async () => {
    const adminUrl = required(process.env.RUNPLANE_TEST_ADMIN_URL, 'RUNPLANE_TEST_ADMIN_URL');
    const name = `${templateName().replace(/_tpl$/, '')}_w${process.env.JEST_WORKER_ID ?? '1'}_dropped`;
    await withAdminClient(adminUrl, (c) =>
      c.query(`CREATE DATABASE "${name}" TEMPLATE "${templateName()}" STRATEGY FILE_COPY`),
    );
    const t = await createTestApp({ DATABASE_URL: urlFor(adminUrl, name) });
    try {
      const user = await t.user();
      await t.http.get('/readyz').expect(200);
      await withAdminClient(adminUrl, (c) => c.query(`DROP DATABASE "${name}" WITH (FORCE)`));
      const started = Date.now();
      const ready = await t.http.get('/readyz');
      expect(Date.now() - started).toBeLessThan(2500);
      expect(ready.status).toBe(503);
      expect(ready.body.code).toBe('DATABASE_UNAVAILABLE');
      expect(ready.headers['retry-after']).toBe('1');
      await t.http.get('/healthz').expect(200);
      expect(isUnavailable(answer('me', await t.http.get('/api/v1/users/me').set(user.auth)))).toBe(true);
    } finally {
      await t.close();
      await withAdminClient(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    }
  });
});
