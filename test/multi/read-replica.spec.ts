import { Client } from 'pg';
import { Instances } from '../support/instances';
import { PostgresCluster } from '../support/cluster';
import { lifecycleLoad, setUpActors, summary } from '../support/load';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A real streaming replica: a primary cluster of its own and a hot standby made from it with pg_basebackup, on
 * another port. Two instances with DATABASE_READ_URL on the standby: the runs list, history, costs and billing reports
 * are served there when it is fresh; a client that has just written never sees an older state (the standby's replay
 * is even paused to make it lag); the lag is in /metrics.
 */
describe('a streaming replica for reads (pg_basebackup hot standby)', () => {
  let primary: PostgresCluster;
  let standby: PostgresCluster;
  let instances: Instances;
  let onStandby: Client;
  let actors: Awaited<ReturnType<typeof setUpActors>>;
  const reads = async (servedBy: string, reason?: string) => {
    let n = 0;
    for (let i = 0; i < instances.size; i++) {
      const text = await instances.metrics(i);
      const re = new RegExp(
        `^runplane_replica_reads_total\\{served_by="${servedBy}",reason="${reason ?? '[a-z]+'}"\\} (\\d+)`,
        'gm',
      );
      for (const m of text.matchAll(re)) n += Number(m[1]);
    }
    return n;
  };
  const runsPath = () => `/api/v1/projects/${actors.project}/runs`;

  beforeAll(async () => {
    primary = await PostgresCluster.create();
    standby = await PostgresCluster.standbyOf(primary);
    const admin = new Client({ connectionString: primary.url() });
    await admin.connect();
    await admin.query('CREATE DATABASE runplane');
    await admin.end();
    instances = await Instances.start(2, primary.url('runplane'), { DATABASE_READ_URL: standby.url('runplane') });
    onStandby = new Client({ connectionString: standby.url('runplane') });
    await onStandby.connect();
    actors = await setUpActors(instances);
  });
  afterAll(async () => {
    await onStandby?.end();
    await instances?.close();
    await standby?.destroy();
    await primary?.destroy();
  });

  it('the standby is a hot standby in recovery, and the heavy reads are served there', async () => {
    expect((await onStandby.query('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(true);
    const before = await reads('replica', 'fresh');
    const submitted = await instances.call('POST', runsPath(), {
      token: actors.owner,
      idempotent: true,
      body: { jobs: [{ spec: { commands: ['true'], image: 'python:3.12', resources: { cpu: 1, memory_mib: 64 } } }] },
    });
    expect(submitted.status).toBe(201);
    const run = submitted.body;
    const today = new Date().toISOString().slice(0, 10);
    // Each heavy read is served by the standby once it has caught up (a read that finds it behind goes to the
    // primary, counted as such): tried until it is, as background writes may keep it a few kB behind for a moment.
    const servedThere: string[] = [];
    for (const path of [
      `${runsPath()}?limit=5`,
      `${runsPath()}/${run.id}/jobs/${run.jobs[0].id}/submissions`,
      `${runsPath()}/${run.id}/cost`,
      `/api/v1/projects/${actors.project}/billing?from=${today}&to=${today}`,
    ]) {
      for (let attempt = 0; attempt < 50; attempt++) {
        const was = await reads('replica', 'fresh');
        const res = await instances.call('GET', path, { token: actors.owner });
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
        if ((await reads('replica', 'fresh')) > was) {
          servedThere.push(path);
          break;
        }
        await sleep(100);
      }
    }
    expect(servedThere).toHaveLength(4);
    expect(await reads('replica', 'fresh')).toBeGreaterThanOrEqual(before + 4);
    expect(await instances.metrics(0)).toMatch(/^runplane_replica_lag_bytes \d+/m);
  });

  it("a client's own write is never missing from its next read, even with the standby's replay paused", async () => {
    await onStandby.query('SELECT pg_wal_replay_pause()');
    try {
      const behindBefore = await reads('primary', 'behind');
      for (let k = 0; k < 5; k++) {
        const submitted = await instances.call('POST', runsPath(), {
          token: actors.owner,
          idempotent: true,
          body: {
            jobs: [{ spec: { commands: ['true'], image: 'python:3.12', resources: { cpu: 1, memory_mib: 64 } } }],
          },
        });
        expect(submitted.status).toBe(201);
        // Read it back through the other instance: the list and the run's history.
        const list = await instances.call('GET', `${runsPath()}?limit=5`, {
          token: actors.owner,
          instance: (submitted.instance + 1) % 2,
        });
        expect(list.status).toBe(200);
        expect(list.body.items.map((r: { id: string }) => r.id)).toContain(submitted.body.id);
        const history = await instances.call(
          'GET',
          `${runsPath()}/${submitted.body.id}/jobs/${submitted.body.jobs[0].id}/submissions`,
          { token: actors.owner },
        );
        expect(history.status).toBe(200);
      }
      expect(await reads('primary', 'behind')).toBeGreaterThanOrEqual(behindBefore + 10);
      // The standby really is behind, and /metrics says by how much.
      expect(await instances.metric(0, 'runplane_replica_lag_bytes')).toBeGreaterThan(0);
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
    for (let k = 0; k < 50 && ((await instances.metric(0, 'runplane_replica_lag_bytes')) ?? 1) > 0; k++)
      await sleep(100);
  });

  it('under lifecycle load: no acknowledged run missing from its writer’s next list; the lag as measured', async () => {
    let done = false;
    const missing: string[] = [];
    const lags: number[] = [];
    const writerReader = async () => {
      while (!done) {
        const submitted = await instances.call('POST', runsPath(), {
          token: actors.owner,
          idempotent: true,
          body: {
            jobs: [{ spec: { commands: ['true'], image: 'python:3.12', resources: { cpu: 1, memory_mib: 64 } } }],
          },
        });
        if (submitted.status !== 201) continue;
        // The load's submitter adds runs to the same project meanwhile: a page of 50 newest still holds this one.
        const list = await instances.call('GET', `${runsPath()}?limit=50&include_jobs=false`, { token: actors.owner });
        if (!list.body.items?.some((r: { id: string }) => r.id === submitted.body.id)) missing.push(submitted.body.id);
      }
    };
    const sampler = async () => {
      while (!done) {
        lags.push((await instances.metric(0, 'runplane_replica_lag_bytes')) ?? -1);
        await sleep(200);
      }
    };
    const load = lifecycleLoad(instances, actors, () => done, { submitters: 1, workers: 2, listers: 1 });
    const checks = Promise.all([writerReader(), sampler()]);
    await sleep(6000);
    done = true;
    const [result] = await Promise.all([load, checks]);
    const sorted = [...lags].sort((a, b) => a - b);
    process.stdout.write(
      `replica under load: answers ${JSON.stringify(summary(result.answers))}; lag bytes p50 ` +
        `${sorted[Math.floor(sorted.length / 2)]} max ${sorted[sorted.length - 1]}; reads on the standby ` +
        `${await reads('replica')}, on the primary ${await reads('primary')}\n`,
    );
    expect(missing).toEqual([]);
    expect(result.answers.filter((a) => a.status >= 500)).toEqual([]);
  });
});
