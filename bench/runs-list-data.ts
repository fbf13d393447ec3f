import { randomBytes, randomInt } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';

/**
 * The runs-list benches' data (targets.md, "Runs list"): runs of 2 jobs × 2 replicas with ~3 KB specs submitted
 * through the API, then histories of H submissions per job with dstack-shaped provisioning/runtime documents written
 * in SQL the way the app's retry path writes them (half of the jobs with gaps in their numbering).
 */

/** What the data generation needs of a server: its HTTP API as an admin, and a pool on its database. */
export interface ListBenchTarget {
  http<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    expect?: number,
  ): Promise<{ status: number; body: T; bytes: number }>;
  pool: Pool;
}

/** Which runs a bench job belongs to: the listed runs, the background, or a shallow twin (history H = N). */
export type JobSet = 'listed' | 'background' | 'h1' | 'h10';

/** Distinct provisioning/runtime document pairs; each submission takes one by its job's salt and its number. */
const PAYLOADS = 1000;

/** Old submissions ran and were interrupted (they carry provisioning/runtime data); the run retries on no_capacity. */
export const FAILED_REASON = 'interrupted_by_no_capacity';
/** What the gaps stand for: no-capacity submissions that never ran, folded into the job's counts (product.md). */
export const FOLDED_REASON = 'failed_to_start_due_to_no_capacity';
export const RETRY = { on_events: ['no_capacity'], duration_s: 7 * 24 * 3600 };

/** Submission number of the k-th existing submission (k from 0): gapped jobs skip every 3rd number (2, 5, 8, ...). */
export const numberOf = (k: number, gapped: boolean) => (gapped ? k + Math.floor(k / 2) : k);
const SQL_NUMBER_OF = (k: string) => `(${k} + CASE WHEN b.gapped THEN ${k} / 2 ELSE 0 END)`;

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const pick = <T>(xs: readonly T[]): T => xs[randomInt(xs.length)];

/** A job spec of ~2.5–3.5 KB: a few commands and an environment of hashes, tokens and paths. */
export function bigJobSpec(i: number): Record<string, unknown> {
  const env: Record<string, string> = {};
  for (let k = 0; k < 28; k++)
    env[`BENCH_VAR_${k}_${pick(['PATH', 'TOKEN', 'URL', 'HASH', 'MODE'])}`] =
      `${pick(['s3://bucket/', 'https://hub.example/', '/mnt/data/', ''])}${hex(24 + randomInt(16))}`;
  return {
    commands: [
      'pip install -r requirements.txt',
      `python train.py --config configs/exp-${i}.yaml --seed ${randomInt(1e6)} --output /mnt/out/${hex(8)}`,
      `python eval.py --checkpoint /mnt/out/${hex(8)}/last.ckpt --report /mnt/out/report-${hex(6)}.json`,
    ],
    image: 'ghcr.io/example/trainer:2026.07.1-cuda12.4',
    env,
    resources: { cpu: 1, memory_mib: 1024 },
    max_duration_s: 86400,
  };
}

/** provisioning_data and runtime_data shaped like dstack's, 2–5 KB together (JSON text). */
function payload(): { pd: Record<string, unknown>; rd: Record<string, unknown> } {
  const region = pick(['us-east-1', 'us-west-2', 'eu-west-1', 'eu-central-1', 'ap-northeast-1']);
  const gpu = pick(['A10G', 'L4', 'A100', 'H100', 'T4']);
  const pd = {
    backend: pick(['aws', 'gcp', 'azure', 'runpod', 'lambda']),
    region,
    availability_zone: `${region}${pick(['a', 'b', 'c'])}`,
    instance_type: {
      name: pick(['g5.2xlarge', 'g6.xlarge', 'p4d.24xlarge', 'p5.48xlarge', 'g4dn.xlarge']),
      resources: {
        cpus: pick([4, 8, 16, 96]),
        memory_mib: pick([16384, 32768, 65536, 1179648]),
        gpus: Array.from({ length: pick([1, 1, 2, 4, 8]) }, () => ({
          name: gpu,
          memory_mib: pick([16384, 24576, 40960, 81920]),
          vendor: 'nvidia',
        })),
        spot: randomInt(2) === 1,
        disk: { size_mib: pick([102400, 204800, 512000]) },
        description: `${gpu} instance with local NVMe, EFA networking and ${pick([1, 2, 4])} ENIs`,
      },
    },
    instance_id: `i-${hex(9)}`,
    hostname: `ip-10-${randomInt(256)}-${randomInt(256)}-${randomInt(256)}.${region}.compute.internal`,
    internal_ip: `10.${randomInt(256)}.${randomInt(256)}.${randomInt(256)}`,
    public_ip: `${randomInt(256)}.${randomInt(256)}.${randomInt(256)}.${randomInt(256)}`,
    price: Number((Math.random() * 40).toFixed(4)),
    username: 'ubuntu',
    ssh_port: 22,
    dockerized: true,
    ssh_proxy: null,
    backend_data: JSON.stringify({
      reservation_id: hex(10),
      placement_group: `pg-${hex(6)}`,
      launch_template: hex(40),
      tags: Array.from({ length: 6 }, () => hex(12)),
    }),
    reservation: null,
    volumes: Array.from({ length: 1 + randomInt(3) }, () => ({
      volume_id: `vol-${hex(9)}`,
      device_name: `/dev/sd${pick(['f', 'g', 'h'])}`,
      size_gb: pick([100, 500, 1000]),
    })),
  };
  const rd = {
    network_mode: pick(['host', 'bridge']),
    ports: Object.fromEntries(
      Array.from({ length: 2 + randomInt(4) }, (_, i) => [String(8000 + i), 30000 + randomInt(30000)]),
    ),
    volume_names: Array.from({ length: 1 + randomInt(3) }, () => `vol-${hex(6)}`),
    working_dir: `/workflow/${hex(6)}`,
    username: 'root',
    offer: {
      price: Number((Math.random() * 40).toFixed(4)),
      availability: 'available',
      instance: { name: gpu, region },
      blocks: 1,
      total_blocks: 1,
    },
    // Free-form runner state: sized so that the two documents together span 2–5 KB.
    runner_state: Array.from({ length: 7 + randomInt(24) }, () => ({ key: hex(6), value: hex(16 + randomInt(16)) })),
  };
  return { pd, rd };
}

async function inTransaction<T>(env: ListBenchTarget, fn: (c: PoolClient) => Promise<T>): Promise<T> {
  const c = await env.pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SET LOCAL synchronous_commit = off'); // bulk generation only; the app's own writes are untouched
    const out = await fn(c);
    await c.query('COMMIT');
    return out;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

/**
 * Runs through the API, one per entry of `plan` (its project and set), in plan order with a few requests in flight
 * (the server has a pool of 10). Map run id → set.
 */
export async function submitRuns(
  env: ListBenchTarget,
  plan: { project: string; set: JobSet }[],
): Promise<Map<string, JobSet>> {
  const setOfRun = new Map<string, JobSet>();
  let next = 0;
  const worker = async () => {
    while (next < plan.length) {
      const i = next++;
      const res = await env.http<{ id: string; jobs: unknown[] }>(
        'POST',
        `/api/v1/projects/${plan[i].project}/runs`,
        { retry: RETRY, jobs: [0, 1].map((j) => ({ name: `train-${j}`, spec: bigJobSpec(i * 2 + j), replicas: 2 })) },
        201,
      );
      if (res.body.jobs.length !== 4)
        throw new Error(`run submission returned ${res.body.jobs.length} jobs, expected 4`);
      setOfRun.set(res.body.id, plan[i].set);
    }
  };
  await Promise.all([worker(), worker(), worker()]);
  return setOfRun;
}

/** Bench-only helper tables: which set each job is in and whether it is gapped, and a pool of JSON documents. */
export async function prepareHelpers(env: ListBenchTarget, setOfRun: Map<string, JobSet>): Promise<void> {
  await inTransaction(env, async (c) => {
    await c.query(
      `CREATE TABLE bench_jobs (job_id uuid PRIMARY KEY, run_id uuid NOT NULL, set text NOT NULL,
                               gapped boolean NOT NULL, salt int NOT NULL)`,
    );
    // Half of the jobs of each set get gaps: alternate jobs in (run, job_num, replica_num) order.
    await c.query(
      `INSERT INTO bench_jobs (job_id, run_id, set, gapped, salt)
       SELECT j.id, j.run_id, rs.set,
              row_number() OVER (PARTITION BY rs.set ORDER BY r.submitted_at, r.id, j.job_num, j.replica_num) % 2 = 0,
              abs(hashtext(j.id::text)) % ${PAYLOADS}
         FROM jobs j JOIN runs r ON r.id = j.run_id
           JOIN unnest($1::uuid[], $2::text[]) AS rs(run_id, set) ON rs.run_id = j.run_id`,
      [[...setOfRun.keys()], [...setOfRun.values()]],
    );
    await c.query(`CREATE TABLE bench_payloads (i int PRIMARY KEY, pd json NOT NULL, rd json NOT NULL)`);
    const docs = Array.from({ length: PAYLOADS }, payload);
    await c.query(`INSERT INTO bench_payloads (i, pd, rd) SELECT * FROM unnest($1::int[], $2::json[], $3::json[])`, [
      docs.map((_, i) => i),
      docs.map((d) => JSON.stringify(d.pd)),
      docs.map((d) => JSON.stringify(d.rd)),
    ]);
  });
}

/**
 * Gives every job of the chosen set history up to `toH` existing submissions, from `fromH`, writing what the app's
 * own retry path writes: the previous latest becomes a finished no-capacity interruption,
 * the new ones are finished the same way except the newest (running, as after claim + running), and the job rows'
 * facts follow the app's model: latest id/num and status from the newest row, submission_count = every submission
 * ever made (latest num + 1), the gaps counted in folded_submissions, termination_reason = the last one recorded
 * (the retry path copies the previous submission's). Runs get their active counts and derived status.
 * fromH = 0 means "submission 0 exists (written by the API) and only gets its payload and running state". Submission
 * times count back from now in hours from `hMax` (the deepest level the bench will grow to).
 * Afterwards the app's own GET /admin/v1/invariants must report nothing.
 */
export async function growHistory(
  env: ListBenchTarget,
  set: JobSet,
  fromH: number,
  toH: number,
  hMax: number,
): Promise<void> {
  await inTransaction(env, async (c) => {
    if (fromH === 0) {
      await c.query(
        `UPDATE job_submissions s
            SET status = 'running', claimed_at = s.submitted_at + interval '5 s',
                started_at = s.submitted_at + interval '40 s',
                worker_id = 'worker-' || (b.salt % 16), lease_expires_at = now() + interval '1 hour',
                last_heartbeat_at = now(),
                provisioning_data = p.pd, runtime_data = p.rd
           FROM bench_jobs b JOIN bench_payloads p ON p.i = b.salt
          WHERE s.job_id = b.job_id AND b.set = $1::text AND s.submission_num = 0`,
        [set],
      );
    } else {
      await c.query(
        `UPDATE job_submissions s
            SET status = 'failed', termination_reason = '${FAILED_REASON}',
                finished_at = s.submitted_at + interval '3 min',
                exit_status = NULL, lease_expires_at = NULL
           FROM jobs j JOIN bench_jobs b ON b.job_id = j.id
          WHERE s.id = j.latest_submission_id AND b.set = $1::text`,
        [set],
      );
      // Ordered by k first: a job's submissions are spread over the table as they would be over time.
      await c.query(
        `INSERT INTO job_submissions (id, job_id, run_id, job_group_id, submission_num, status, termination_reason,
                                      exit_status, priority, cpu, memory_mib, gpu, submitted_at, claimed_at,
                                      started_at, finished_at, worker_id, lease_expires_at, last_heartbeat_at,
                                      provisioning_data, runtime_data)
         SELECT gen_random_uuid(), j.id, j.run_id, j.job_group_id, ${SQL_NUMBER_OF('k')},
                CASE WHEN k = $3::int - 1 THEN 'running' ELSE 'failed' END,
                CASE WHEN k = $3::int - 1 THEN NULL ELSE '${FAILED_REASON}' END,
                NULL, 0, 1, 1024, 0,
                now() - interval '1 hour' * ($4::int - k), now() - interval '1 hour' * ($4::int - k) + interval '5 s',
                now() - interval '1 hour' * ($4::int - k) + interval '40 s',
                CASE WHEN k = $3::int - 1 THEN NULL
                  ELSE now() - interval '1 hour' * ($4::int - k) + interval '3 min' END,
                'worker-' || ((b.salt + k) % 16),
                CASE WHEN k = $3::int - 1 THEN now() + interval '1 hour' END,
                now() - interval '1 hour' * ($4::int - k) + interval '2 min',
                p.pd, p.rd
           FROM jobs j
           JOIN bench_jobs b ON b.job_id = j.id AND b.set = $1::text
           CROSS JOIN generate_series($2::int, $3::int - 1) AS k
           JOIN bench_payloads p ON p.i = (b.salt + k) % ${PAYLOADS}
          ORDER BY k, j.id`,
        [set, fromH, toH, hMax + 1],
      );
    }
    await c.query(
      `UPDATE jobs j
          SET latest_submission_id = l.id, latest_submission_num = l.submission_num, status = l.status,
              termination_reason = coalesce(l.termination_reason, t.termination_reason),
              submission_count = l.submission_num + 1,
              folded_submissions = CASE WHEN l.submission_num + 1 > n.count
                                        THEN jsonb_build_object('${FOLDED_REASON}', l.submission_num + 1 - n.count)
                                          ELSE '{}' END
         FROM bench_jobs b
        CROSS JOIN LATERAL (SELECT s.id, s.submission_num, s.status, s.termination_reason FROM job_submissions s
                             WHERE s.job_id = b.job_id ORDER BY s.submission_num DESC LIMIT 1) l
        CROSS JOIN LATERAL (SELECT count(*)::int AS count FROM job_submissions s WHERE s.job_id = b.job_id) n
         LEFT JOIN LATERAL (SELECT s.termination_reason FROM job_submissions s
                             WHERE s.job_id = b.job_id AND s.termination_reason IS NOT NULL
                               ORDER BY s.submission_num DESC LIMIT 1) t ON true
        WHERE j.id = b.job_id AND b.set = $1::text`,
      [set],
    );
    // Every job runs its newest submission: keep the runs' active counts (on their root groups' counters) and
    // status in line with that.
    const running = `SELECT j.run_id, count(*)::int AS n FROM jobs j
                       JOIN bench_jobs b ON b.job_id = j.id AND b.set = $1::text
                      WHERE j.status = 'running' GROUP BY j.run_id`;
    await c.query(
      `UPDATE job_group_counters c
          SET n_provisioning = 0, n_running = CASE WHEN c.token = 0 THEN x.n ELSE 0 END, n_retrying = 0
         FROM (${running}) x WHERE c.run_id = x.run_id AND c.job_group_id = 0`,
      [set],
    );
    await c.query(
      `UPDATE runs r SET status = 'running', status_message = NULL, termination_reason = NULL FROM (${running}) x
         WHERE r.id = x.run_id`,
      [set],
    );
    // The shape is what we say it is, or we stop here.
    const { rows } = await c.query(
      `SELECT count(*)::int AS bad FROM jobs j JOIN bench_jobs b ON b.job_id = j.id AND b.set = $1::text
        WHERE j.latest_submission_num <> ${SQL_NUMBER_OF('($2::int - 1)')}
          OR j.submission_count <> j.latest_submission_num + 1 OR j.status <> 'running'
           OR (SELECT count(*) FROM job_submissions s WHERE s.job_id = j.id) <> $2::int`,
      [set, toH],
    );
    if (rows[0].bad !== 0) throw new Error(`data generation: ${rows[0].bad} jobs do not have H=${toH} as intended`);
  });
  // VACUUM too, not only ANALYZE: as autovacuum would have by then; gives every contender index-only scans.
  await env.pool.query('VACUUM (ANALYZE) job_submissions, jobs, runs');
}

// The baselines, as raw SQL on the same database. "The listed runs' jobs" is spelled through jobs.run_id, so both
// can read job_submissions through its (job_id, submission_num) index, as dstack's do through ix_jobs_run_id.
const JOBS_OF_RUNS = `SELECT id FROM jobs WHERE run_id = ANY($1::uuid[])`;

/**
 * dstack today: row_number() over every submission of the listed runs ($1), the newest $2 of each job; run twice
 * (the 2nd over status rows only). `columns`: what the numbered rows carry (`inner`, from `s`) and what is selected
 * from them (`outer`, from `x`); all of them by default.
 */
export const windowSql = (onlyTerminated: boolean, columns = { inner: 's.*', outer: '*' }) => `
  SELECT ${columns.outer} FROM (
    SELECT ${columns.inner}, row_number() OVER (PARTITION BY s.job_id ORDER BY s.submission_num DESC) AS rn
      FROM job_submissions s
     WHERE s.job_id IN (${JOBS_OF_RUNS})${onlyTerminated ? ' AND s.termination_reason IS NOT NULL' : ''}
  ) x
  WHERE x.rn <= $2
  ORDER BY x.run_id, x.job_id, x.submission_num`;

/**
 * The seed's proposal: max numbers per job by GROUP BY over every submission of the listed runs ($1), then the rows
 * within the last $2 and the newest with a status; `select` from `s` (and `l.latest`), every column by default.
 */
export const groupBySql = (select = 's.*') => `
  SELECT ${select}
    FROM job_submissions s
    JOIN (SELECT job_id, max(submission_num) AS latest,
                 max(CASE WHEN termination_reason IS NOT NULL THEN submission_num END) AS latest_terminated
            FROM job_submissions
           WHERE job_id IN (${JOBS_OF_RUNS})
           GROUP BY job_id) l ON s.job_id = l.job_id
   WHERE s.submission_num > l.latest - $2 OR s.submission_num = l.latest_terminated`;
