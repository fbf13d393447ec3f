import { Client } from 'pg';
import { makeProject } from '../support/factories';
import { Instances } from '../support/instances';
import { PgBouncer, PostgresCluster } from '../support/cluster';
import { spreadOver, tokenUser } from '../support/spread';
import { randomisedWorkload } from '../support/workload';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Three instances on one PostgreSQL (a cluster of this test's own), directly and through PgBouncer in both modes:
 * the randomised workload spread over them; the background loops on exactly one at a time, and a takeover after
 * kill -9 of the leader.
 */
describe.each([
  { via: 'direct', mode: undefined },
  { via: 'PgBouncer, transaction pooling, no named statements', mode: 'transaction' as const },
  { via: 'PgBouncer, session pooling, named statements', mode: 'session' as const },
])('three instances on one PostgreSQL ($via)', ({ mode }) => {
  let pg: PostgresCluster;
  let bouncer: PgBouncer | undefined;
  let instances: Instances;
  let sql: Client;

  beforeAll(async () => {
    pg = await PostgresCluster.create();
    const direct = pg.url();
    bouncer = mode ? await PgBouncer.start({ port: pg.port }, mode) : undefined;
    instances = await Instances.start(3, bouncer ? bouncer.through(direct) : direct, {
      ...(mode === 'transaction' ? { DATABASE_NAMED_STATEMENTS: 'false', DATABASE_SESSION_URL: direct } : {}),
    });
    sql = new Client({ connectionString: direct });
    await sql.connect();
  });
  afterAll(async () => {
    await sql?.end();
    await instances?.close();
    await bouncer?.stop();
    await pg?.destroy();
  });

  it('the randomised workload across 3 instances: zero invariant mismatches, no submission run twice', async () => {
    const t = spreadOver(instances);
    const owner = tokenUser(await instances.user());
    const admin = tokenUser(await instances.user('admin'));
    const service = tokenUser(await instances.user('service'));
    const project = (await makeProject(t, owner)).name;
    const { seed, claimed } = await randomisedWorkload(
      t,
      { owner, service, admin, project },
      {
        lapse: async (id) => {
          await sql.query(`UPDATE job_submissions SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [
            id,
          ]);
        },
        passes: async () => {
          const res = await t.http.post('/admin/v1/maintenance/cleanup').set(admin.auth).send({});
          if (res.status !== 200)
            for (let i = 0; i < instances.size; i++)
              process.stdout.write(`instance ${i} log:\n${instances.output(i).split('\n').slice(-40).join('\n')}\n`);
          expect({ status: res.status, body: res.status === 200 ? 'a report' : res.body }).toEqual({
            status: 200,
            body: 'a report',
          });
        },
      },
    );
    process.stdout.write(`workload over 3 instances (${mode ?? 'direct'}): seed ${seed}, ${claimed} claimed\n`);
    for (let i = 0; i < 3; i++)
      expect(await instances.metrics(i)).not.toMatch(/runplane_http_request_duration_seconds_count\{[^}]*status="5/);
  });

  it('background loops on exactly one instance; after kill -9 of it another takes over in one interval', async () => {
    const leaders = async () => {
      const flags = [];
      for (let i = 0; i < instances.size; i++)
        flags.push(instances.url(i) ? ((await instances.metric(i, 'runplane_background_loops_leader')) ?? 0) : 0);
      return flags;
    };
    let flags = await leaders();
    for (let k = 0; k < 50 && flags.filter((f) => f === 1).length !== 1; k++) {
      await sleep(100);
      flags = await leaders();
    }
    expect(flags.filter((f) => f === 1)).toHaveLength(1);
    // Several elections later, still exactly one.
    await sleep(2500);
    flags = await leaders();
    expect(flags.filter((f) => f === 1)).toHaveLength(1);
    const leader = flags.indexOf(1);

    const killedAt = Date.now() / 1000;
    await instances.kill9(leader);
    let next = -1;
    let since = 0;
    for (let k = 0; k < 100 && next < 0; k++) {
      await sleep(50);
      flags = await leaders();
      next = flags.indexOf(1);
      if (next >= 0) since = (await instances.metric(next, 'runplane_background_loops_leader_since_seconds')) ?? 0;
    }
    expect(next).toBeGreaterThanOrEqual(0);
    expect(next).not.toBe(leader);
    expect(flags.filter((f) => f === 1)).toHaveLength(1);
    const failoverMs = Math.round((since - killedAt) * 1000);
    process.stdout.write(`loops failover after kill -9 (${mode ?? 'direct'}): ${failoverMs} ms\n`);
    // The election interval is the shortest loop's (1 s): the lock is free as soon as the dead session ends.
    expect(failoverMs).toBeLessThanOrEqual(1000 + 500);
    await instances.start(leader);
  });
});
