import { Client } from 'pg';
import { PgBouncer, PostgresCluster } from '../test/support/cluster';
import { Instances } from '../test/support/instances';
import { lifecycleLoad, LoadResult, setUpActors } from '../test/support/load';
import { log, printTable, QUICK, TargetResult } from './support';

/**
 * `npm run bench -- instances`: several instances on one PostgreSQL (a cluster of the bench's own, so restarts and
 * load disturb nothing else), side by side in one run: completions/s and the runs list's p50 under lifecycle load
 * with 1 and 3 instances, directly and through PgBouncer (transaction pooling, no named statements); the standby's
 * replay lag under that load (pg_basebackup hot standby); the time for the background loops to fail over after
 * kill -9 of their leader. Figures only, no targets: on a 2-core machine the instances share the cores with
 * PostgreSQL and the load generator.
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? (QUICK ? 3 : 12));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function p50(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : NaN;
}

async function createDatabase(cluster: PostgresCluster, name: string): Promise<string> {
  const c = new Client({ connectionString: cluster.url() });
  await c.connect();
  await c.query(`CREATE DATABASE "${name}"`);
  await c.end();
  return cluster.url(name);
}

async function measure(instances: Instances): Promise<LoadResult> {
  const actors = await setUpActors(instances);
  let done = false;
  const load = lifecycleLoad(instances, actors, () => done, { submitters: 1, workers: 4, listers: 2, replicas: 4 });
  await sleep(SECONDS * 1000);
  done = true;
  return load;
}

export async function runInstances(): Promise<TargetResult[]> {
  log(`instances: ${await PostgresCluster.version()}, ${await PgBouncer.version()}; ${SECONDS} s of load per shape`);
  const primary = await PostgresCluster.create('bench');
  const rows: (string | number)[][] = [];
  try {
    // Completions/s and list p50: 1 and 3 instances, direct and through a transaction-pooling PgBouncer.
    const bouncer = await PgBouncer.start({ port: primary.port }, 'transaction');
    try {
      for (const via of ['direct', 'pgbouncer'] as const) {
        for (const n of [1, 3]) {
          const url = await createDatabase(primary, `bench_${via}_${n}`);
          const env: Record<string, string> =
            via === 'pgbouncer'
              ? { DATABASE_NAMED_STATEMENTS: 'false', DATABASE_SESSION_URL: url, DATABASE_POOL_SIZE: '10' }
              : { DATABASE_POOL_SIZE: '10' };
          const instances = await Instances.start(n, via === 'pgbouncer' ? bouncer.through(url) : url, env);
          try {
            const r = await measure(instances);
            const lists = r.answers.filter((a) => a.what === 'list' && a.status === 200).map((a) => a.ms);
            const errors = r.answers.filter((a) => a.status >= 500).length + r.failures.length;
            rows.push([
              `${n} instance${n > 1 ? 's' : ''}, ${via === 'direct' ? 'direct' : 'PgBouncer (transaction)'}`,
              (r.completed.length / SECONDS).toFixed(1),
              `${p50(lists).toFixed(1)} ms`,
              lists.length,
              errors,
            ]);
            log(`  ${rows[rows.length - 1].join(' | ')}`);
          } finally {
            await instances.close();
          }
        }
      }
    } finally {
      await bouncer.stop();
    }
    printTable(
      'instances: lifecycle load (1 submitter, 4 workers, 2 listers) over N instances',
      ['shape', 'completions/s', 'list p50', 'lists', '5xx'],
      rows,
      ['2 cores shared by PostgreSQL, the instances, the load generator and other work on this machine'],
    );

    // Replica lag under the same load, 3 instances reading from a hot standby.
    const standby = await PostgresCluster.standbyOf(primary);
    try {
      const url = await createDatabase(primary, 'bench_replica');
      await sleep(500);
      const instances = await Instances.start(3, url, { DATABASE_READ_URL: standby.url('bench_replica') });
      try {
        const lagBytes: number[] = [];
        const lagSeconds: number[] = [];
        let done = false;
        const sampler = (async () => {
          while (!done) {
            lagBytes.push((await instances.metric(0, 'runplane_replica_lag_bytes')) ?? NaN);
            lagSeconds.push((await instances.metric(0, 'runplane_replica_lag_seconds')) ?? NaN);
            await sleep(100);
          }
        })();
        const r = await measure(instances);
        done = true;
        await sampler;
        const text = await instances.metrics(0);
        const served = (who: string) =>
          [...text.matchAll(new RegExp(`^runplane_replica_reads_total\\{served_by="${who}"[^}]*\\} (\\d+)`, 'gm'))]
            .map((m) => Number(m[1]))
            .reduce((a, b) => a + b, 0);
        printTable(
          'instances: standby replay lag under lifecycle load (3 instances, DATABASE_READ_URL)',
          [
            'samples',
            'lag bytes p50',
            'lag bytes max',
            'lag s p50',
            'lag s max',
            'completions/s',
            'reads standby/primary',
          ],
          [
            [
              lagBytes.length,
              p50(lagBytes),
              Math.max(...lagBytes),
              p50(lagSeconds).toFixed(3),
              Math.max(...lagSeconds).toFixed(3),
              (r.completed.length / SECONDS).toFixed(1),
              `${served('replica')}/${served('primary')} (instance 0)`,
            ],
          ],
        );
      } finally {
        await instances.close();
      }
    } finally {
      await standby.destroy();
    }

    // Loop failover: kill -9 the leader, time until another instance holds the lock (from its /metrics).
    const url = await createDatabase(primary, 'bench_failover');
    const instances = await Instances.start(3, url);
    try {
      const times: number[] = [];
      for (let round = 0; round < (QUICK ? 1 : 3); round++) {
        let leader = -1;
        for (let k = 0; k < 100 && leader < 0; k++) {
          for (let i = 0; i < 3 && leader < 0; i++)
            if (instances.url(i) && (await instances.metric(i, 'runplane_background_loops_leader')) === 1) leader = i;
          if (leader < 0) await sleep(100);
        }
        if (leader < 0) throw new Error('no leader');
        const killedAt = Date.now() / 1000;
        await instances.kill9(leader);
        let since = 0;
        for (let k = 0; k < 200 && since === 0; k++) {
          await sleep(20);
          for (let i = 0; i < 3; i++)
            if (instances.url(i) && (await instances.metric(i, 'runplane_background_loops_leader')) === 1)
              since = (await instances.metric(i, 'runplane_background_loops_leader_since_seconds')) ?? 0;
        }
        times.push(Math.round((since - killedAt) * 1000));
        await instances.start(leader);
      }
      printTable(
        'instances: background loops failover after kill -9 of the leader',
        ['rounds', 'ms each'],
        [[times.length, times.join(', ')]],
      );
    } finally {
      await instances.close();
    }
  } finally {
    await primary.destroy();
  }
  return [];
}
