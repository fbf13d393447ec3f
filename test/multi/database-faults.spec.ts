import { Client } from 'pg';
import { Instances } from '../support/instances';
import { PostgresCluster } from '../support/cluster';
import { lifecycleLoad, LoadResult, lostWrites, setUpActors, summary } from '../support/load';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Database faults under load over two instances, on a PostgreSQL cluster of this test's own (restarting the shared
 * one would break every other test): the server stopped and started again, sessions terminated. While the database
 * is gone the API answers 503 in the contract's error shape and /readyz says so; it recovers without restarting
 * anything; nothing acknowledged is lost. And a statement timeout is a 503 too.
 */
describe('database faults under load (a cluster of its own)', () => {
  let pg: PostgresCluster;
  let instances: Instances;
  let sql: Client;
  let actors: Awaited<ReturnType<typeof setUpActors>>;
  const connectSql = async () => {
    sql = new Client({ connectionString: pg.url() });
    sql.on('error', () => undefined);
    await sql.connect();
  };
  beforeAll(async () => {
    pg = await PostgresCluster.create();
    instances = await Instances.start(2, pg.url());
    actors = await setUpActors(instances);
    await connectSql();
  });
  afterAll(async () => {
    await sql?.end().catch(() => undefined);
    await instances?.close();
    await pg?.destroy();
  });

  /** Polls /readyz of every instance until stopped; returns what it saw, by "status code". */
  const watchReadiness = (stop: () => boolean) =>
    (async () => {
      const seen: Record<string, number> = {};
      while (!stop()) {
        for (let i = 0; i < instances.size; i++) {
          const r = await instances.call('GET', '/readyz', { instance: i });
          const key = `${r.status}${r.body?.code ? ` ${r.body.code}` : ''}`;
          seen[key] = (seen[key] ?? 0) + 1;
        }
        await sleep(100);
      }
      return seen;
    })();

  const expectOnly2xxOr503 = (result: LoadResult) => {
    const bad = result.answers.filter(
      (a) => a.status >= 300 && !(a.status === 503 && a.code === 'DATABASE_UNAVAILABLE') && a.status !== 409,
    );
    expect({ bad: bad.slice(0, 10), counts: summary(result.answers) }).toMatchObject({ bad: [] });
    expect(result.failures).toEqual([]);
  };

  const recovers = async () => {
    for (let i = 0; i < instances.size; i++) {
      let status = 0;
      for (let k = 0; k < 100 && status !== 200; k++) {
        status = (await instances.call('GET', '/readyz', { instance: i })).status;
        if (status !== 200) await sleep(100);
      }
      expect(status).toBe(200);
      const list = await instances.call('GET', `/api/v1/projects/${actors.project}/runs?limit=5`, {
        token: actors.owner,
        instance: i,
      });
      expect(list.status).toBe(200);
    }
    const invariants = await instances.call('GET', '/admin/v1/invariants', { token: actors.admin });
    expect(invariants.body).toMatchObject({ ok: true });
  };

  it('PostgreSQL stopped and started: 503 DATABASE_UNAVAILABLE meanwhile, /readyz says so, all heals', async () => {
    let done = false;
    const load = lifecycleLoad(instances, actors, () => done);
    const readiness = watchReadiness(() => done);
    await sleep(1500);
    await sql.end().catch(() => undefined);
    await pg.stop('fast'); // every session ended, as `pg_ctlcluster restart` does, and a gap before it is back
    await sleep(2000);
    // An answer while it is down, in the contract's shape.
    const down = await instances.call('GET', `/api/v1/projects/${actors.project}/runs`, { token: actors.owner });
    await pg.start();
    await sleep(2000);
    done = true;
    const [result, seen] = await Promise.all([load, readiness]);
    await connectSql();
    process.stdout.write(
      `postgres restart: answers ${JSON.stringify(summary(result.answers))}; /readyz ${JSON.stringify(seen)}\n`,
    );
    expect(down.status).toBe(503);
    expect(down.body).toEqual({
      status_code: 503,
      code: 'DATABASE_UNAVAILABLE',
      message: expect.any(String),
      details: [],
    });
    expect(seen['503 DATABASE_UNAVAILABLE']).toBeGreaterThan(0);
    expect(seen['200']).toBeGreaterThan(0);
    expectOnly2xxOr503(result);
    expect(result.answers.filter((a) => a.status === 503).length).toBeGreaterThan(0);
    await recovers();
    expect(await lostWrites(sql, result)).toEqual({ runs: [], completed: [] });
  });

  it('pg_ctl restart -m fast under load (what pg_ctlcluster restart runs): same', async () => {
    let done = false;
    const load = lifecycleLoad(instances, actors, () => done);
    await sleep(1000);
    await sql.end().catch(() => undefined);
    await pg.restart();
    await sleep(1500);
    done = true;
    const result = await load;
    await connectSql();
    process.stdout.write(`postgres pg_ctl restart: answers ${JSON.stringify(summary(result.answers))}\n`);
    expectOnly2xxOr503(result);
    await recovers();
    expect(await lostWrites(sql, result)).toEqual({ runs: [], completed: [] });
  });

  it('pg_terminate_backend on every app session, again and again under load: 2xx or 503, nothing lost', async () => {
    let done = false;
    let terminated = 0;
    const load = lifecycleLoad(instances, actors, () => done);
    for (let k = 0; k < 20; k++) {
      await sleep(200);
      const { rows } = await sql.query<{ n: number }>(
        `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE application_name LIKE 'runplane%' AND pid <> pg_backend_pid()`,
      );
      terminated += rows[0].n;
    }
    done = true;
    const result = await load;
    process.stdout.write(
      `pg_terminate_backend: ${terminated} sessions; answers ${JSON.stringify(summary(result.answers))}\n`,
    );
    expect(terminated).toBeGreaterThan(10);
    expectOnly2xxOr503(result);
    await recovers();
    expect(await lostWrites(sql, result)).toEqual({ runs: [], completed: [] });
  });
});

describe('a statement timeout', () => {
  let pg: PostgresCluster;
  let instances: Instances;
  let sql: Client;
  beforeAll(async () => {
    pg = await PostgresCluster.create();
    instances = await Instances.start(1, pg.url(), { DATABASE_STATEMENT_TIMEOUT_MS: '500' });
    sql = new Client({ connectionString: pg.url() });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await instances?.close();
    await pg?.destroy();
  });

  it('is answered 503 in the error shape while a lock holds the statement past it; then served again', async () => {
    const actors = await setUpActors(instances);
    const list = () =>
      instances.call('GET', `/api/v1/projects/${actors.project}/runs?limit=5`, { token: actors.owner });
    expect((await list()).status).toBe(200);
    await sql.query('BEGIN');
    await sql.query('LOCK TABLE runs IN ACCESS EXCLUSIVE MODE');
    const slow = await list();
    await sql.query('ROLLBACK');
    expect(slow.status).toBe(503);
    expect(slow.body).toEqual({
      status_code: 503,
      code: 'SERVICE_UNAVAILABLE',
      message: expect.any(String),
      details: [],
    });
    expect((await list()).status).toBe(200);
  });
});
