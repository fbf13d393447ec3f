import type { Duplex } from 'node:stream';
import { Client, type PoolClient } from 'pg';
import { DataSource, type EntityManager, QueryFailedError, type QueryRunner } from 'typeorm';
import { databaseFailure } from '../../src/common/errors/database-unavailable';
import { Env } from '../../src/config/env';
import { preparedQuery } from '../../src/infra/database/prepared';
import { TransactionRunner } from '../../src/infra/database/transaction.runner';
import { createTestApp, describeRealPostgres, TestApp } from '../support/test-app';
import { workerDatabaseUrl } from '../support/test-databases';

/**
 * The rule for a transaction whose connection dies: retried once when it died before COMMIT was sent (nothing was
 * applied), never once the work has returned (COMMIT may have reached the server). Backends are killed exactly
 * where each case needs, from a separate admin connection that waits until the backend is gone.
 */
describeRealPostgres('TransactionRunner: its transactions, and a lost connection (real PostgreSQL)', () => {
  let t: TestApp;
  let runner: TransactionRunner;
  let admin: Client;
  const rows = async (label: string) =>
    (await admin.query<{ n: number }>('SELECT count(*)::int AS n FROM outage_probe WHERE label = $1', [label])).rows[0]
      .n;
  const killOwnBackend = async (m: EntityManager) => {
    const [{ pid }] = (await m.query('SELECT pg_backend_pid() AS pid')) as { pid: number }[];
    await admin.query('SELECT pg_terminate_backend($1, 5000)', [pid]);
  };

  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'outage' });
    runner = t.app.get(TransactionRunner);
    admin = new Client({
      connectionString: await workerDatabaseUrl('outage'),
      application_name: 'runplane-test-admin',
    });
    await admin.connect();
    await admin.query('CREATE TABLE IF NOT EXISTS outage_probe (label text NOT NULL)');
  });
  afterAll(async () => {
    await admin.query('DROP TABLE IF EXISTS outage_probe');
    await admin.end();
    await t.close();
  });

  it('runs a transaction again, on a new connection, when its connection died before COMMIT', async () => {
    let attempts = 0;
    const result = await runner.run(async (m) => {
      attempts++;
      await m.query(`INSERT INTO outage_probe (label) VALUES ('before-commit')`);
      if (attempts === 1) await killOwnBackend(m);
      await m.query('SELECT 1');
      return 'done';
    });
    expect(result).toBe('done');
    expect(attempts).toBe(2);
    expect(await rows('before-commit')).toBe(1); // the first attempt's insert died with its session
  });

  it('retries only once: a second loss in a row is the answer (503 DATABASE_UNAVAILABLE)', async () => {
    let attempts = 0;
    const err = await runner
      .run(async (m) => {
        attempts++;
        await m.query(`INSERT INTO outage_probe (label) VALUES ('twice')`);
        await killOwnBackend(m);
        await m.query('SELECT 1');
      })
      .catch((e: unknown) => e);
    expect(attempts).toBe(2);
    expect(databaseFailure(err)).toBe('connection_lost');
    expect(await rows('twice')).toBe(0);
  });

  it('never retries once the work has returned: the failure may be a COMMIT the server applied', async () => {
    let attempts = 0;
    const err = await runner
      .run(async (m) => {
        attempts++;
        await m.query(`INSERT INTO outage_probe (label) VALUES ('at-commit')`);
        await killOwnBackend(m); // the next thing on this connection is COMMIT
        return 'done';
      })
      .catch((e: unknown) => e);
    expect(attempts).toBe(1);
    expect(databaseFailure(err)).toBe('connection_lost');
    expect(await rows('at-commit')).toBe(0);
  });

  it("holds the work's statements in one transaction, at the isolation level asked for", async () => {
    const err = await runner
      .run(async (m) => {
        await m.query(`INSERT INTO outage_probe (label) VALUES ('first-statement')`);
        throw new Error('changed my mind');
      })
      .catch((e: unknown) => e);
    expect((err as Error).message).toBe('changed my mind');
    expect(await rows('first-statement')).toBe(0);
    const [{ isolation }] = await runner.run(
      (m) =>
        m.query(`SELECT current_setting('transaction_isolation') AS isolation`) as Promise<{ isolation: string }[]>,
      'REPEATABLE READ',
    );
    expect(isolation).toBe('repeatable read');
  });

  it('nests a savepoint in its transaction: an inner failure undoes the inner work, an outer one all', async () => {
    await runner.run(async (m) => {
      await m.query(`INSERT INTO outage_probe (label) VALUES ('outer-kept')`);
      await m
        .transaction(async (inner) => {
          await inner.query(`INSERT INTO outage_probe (label) VALUES ('inner-undone')`);
          throw new Error('inner');
        })
        .catch(() => undefined);
      await m.transaction((inner) => inner.query(`INSERT INTO outage_probe (label) VALUES ('inner-kept')`));
    });
    expect([await rows('outer-kept'), await rows('inner-undone'), await rows('inner-kept')]).toEqual([1, 0, 1]);
    await runner
      .run(async (m) => {
        await m.transaction((inner) => inner.query(`INSERT INTO outage_probe (label) VALUES ('released-then-undone')`));
        throw new Error('outer');
      })
      .catch(() => undefined);
    expect(await rows('released-then-undone')).toBe(0); // releasing the savepoint did not commit the transaction
  });

  it('pipelines: preparedQuery queues its statement before returning; statements run in the order queued', async () => {
    const order = await runner.run(async (m) => {
      const client = (await (m.queryRunner as QueryRunner).connect()) as PoolClient;
      // Pipelined on a real server, not behind a transaction pooler (data-source-options); the order holds either way.
      expect((client as PoolClient & { pipeline: boolean }).pipeline).toBe(t.app.get(Env).DATABASE_NAMED_STATEMENTS);
      await m.query('CREATE TEMP SEQUENCE queued_order');
      // Nothing awaited between the two: had preparedQuery waited before queuing, the second would run first.
      const first = preparedQuery<{ n: string }>(m, 'test_queued_first', `SELECT nextval('queued_order') AS n`, []);
      const second = client.query<{ n: string }>(`SELECT nextval('queued_order') AS n`);
      const ns = [(await first)[0].n, (await second).rows[0].n];
      await m.query('DROP SEQUENCE queued_order');
      return ns;
    });
    expect(order).toEqual(['1', '2']);
  });

  it("pipelines a tick's statements in one write to the server, each answered as its own", async () => {
    const pipelined = t.app.get(Env).DATABASE_NAMED_STATEMENTS;
    const queryRunner = t.app.get(DataSource).createQueryRunner();
    const client = (await queryRunner.connect()) as PoolClient;
    const stream = (client as unknown as { connection: { stream: Duplex } }).connection.stream;
    const counted = stream as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
    const [write, writev] = [counted._write, counted._writev];
    let writes = 0;
    counted._write = (...a) => (writes++, write.apply(stream, a));
    counted._writev = (...a) => (writes++, writev.apply(stream, a));
    let answers: unknown[];
    try {
      // Queued in one tick, across promise jobs (as a transaction's statements are queued between awaits).
      const first = client.query<{ n: number }>('SELECT 1 AS n');
      const second = Promise.resolve().then(() => client.query<{ n: number }>('SELECT $1::int AS n', [2]));
      const failing = client.query('SELECT 1 / $1::int AS n', [0]).then(
        () => 'answered',
        (err: { code?: string }) => err.code,
      );
      answers = [(await first).rows[0].n, (await second).rows[0].n, await failing];
    } finally {
      [counted._write, counted._writev] = [write, writev];
      await queryRunner.release();
    }
    expect(answers).toEqual([1, 2, '22012']); // division by zero
    // Without pipelining (behind a transaction pooler) each statement waits for the previous one's answer.
    expect(writes).toBe(pipelined ? 1 : 3);
  });

  it('a statement queued behind a failed one fails too, and the transaction changes nothing', async () => {
    const err = await runner
      .run(async (m) => {
        const failing = preparedQuery(m, 'test_queued_failing', 'SELECT 1 / $1::int AS n', [0]);
        failing.catch(() => undefined);
        const behind = preparedQuery(m, 'test_queued_behind', `INSERT INTO outage_probe (label) VALUES ('behind')`, []);
        await behind.catch(() => undefined);
        return failing;
      })
      .catch((e: unknown) => e);
    expect(((err as QueryFailedError).driverError as { code?: string }).code).toBe('22012'); // division by zero
    expect(await rows('behind')).toBe(0);
  });

  it('the app keeps serving afterwards', async () => {
    const user = await t.user();
    await t.http.get('/api/v1/users/me').set(user.auth).expect(200);
  });
});
