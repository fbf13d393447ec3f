import { Client } from 'pg';
import { Instances } from '../support/instances';
import { PostgresCluster } from '../support/cluster';
import { lifecycleLoad, lostWrites, setUpActors, summary } from '../support/load';

/**
 * Three instances restarted one by one with SIGTERM while lifecycle load runs over them: each drains (stops
 * listening, finishes what is in flight, exits 0), clients meet only refused connections (tried on another
 * instance), never a 5xx, and every write that was acknowledged is there afterwards.
 */
describe('rolling restart of 3 instances under load', () => {
  let pg: PostgresCluster;
  let instances: Instances;
  let sql: Client;
  beforeAll(async () => {
    pg = await PostgresCluster.create();
    instances = await Instances.start(3, pg.url());
    sql = new Client({ connectionString: pg.url() });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await instances?.close();
    await pg?.destroy();
  });

  it('no 5xx, in-flight requests finish, every 2xx write is reflected', async () => {
    const actors = await setUpActors(instances);
    let done = false;
    const load = lifecycleLoad(instances, actors, () => done, { submitters: 2, workers: 2, listers: 1 });
    const exits: (number | null)[] = [];
    await new Promise((r) => setTimeout(r, 1500));
    for (let i = 0; i < 3; i++) {
      exits.push(await instances.restart(i));
      await new Promise((r) => setTimeout(r, 1000));
    }
    done = true;
    const result = await load;
    process.stdout.write(
      `rolling restart: answers ${JSON.stringify(summary(result.answers))}; connection errors ` +
        `${JSON.stringify(instances.connectionErrors)}; failures ${result.failures.length}\n`,
    );
    expect(exits).toEqual([0, 0, 0]);
    expect(result.answers.filter((a) => a.status >= 500)).toEqual([]);
    expect(result.failures).toEqual([]);
    // Only refusals, and resets of connections a draining instance had not read a request from (tried again).
    expect(Object.keys(instances.connectionErrors).filter((c) => !['ECONNREFUSED', 'ECONNRESET'].includes(c))).toEqual(
      [],
    );
    expect(result.runs.length).toBeGreaterThan(0);
    expect(result.completed.length).toBeGreaterThan(0);
    expect(await lostWrites(sql, result)).toEqual({ runs: [], completed: [] });
  });
});
