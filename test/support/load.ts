import type { Client } from 'pg';
import type { Answer, Instances } from './instances';

/**
 * Lifecycle load over several instances, for the fault and restart tests and the `instances` bench: submitters
 * (runs, with Idempotency-Keys), workers (claim, running, complete) and listers, until `stop()` says so. Records
 * every answer, and every write that was acknowledged (2xx), so that afterwards each can be looked for.
 */
export interface LoadActors {
  owner: string;
  service: string;
  project: string;
}

export interface LoadRecord {
  what: string;
  status: number;
  code?: string;
  ms: number;
}

export interface LoadResult {
  answers: LoadRecord[];
  /** Runs whose submission was answered 201. */
  runs: string[];
  /** Submissions whose `done` report was answered 200. */
  completed: string[];
  /** Requests that failed without an answer (connection errors not retried), by message. */
  failures: string[];
}

export interface LoadOptions {
  submitters?: number;
  workers?: number;
  listers?: number;
  /** Replicas per submitted run. */
  replicas?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function lifecycleLoad(
  instances: Instances,
  a: LoadActors,
  stop: () => boolean,
  options: LoadOptions = {},
): Promise<LoadResult> {
  const result: LoadResult = { answers: [], runs: [], completed: [], failures: [] };
  const runsPath = `/api/v1/projects/${a.project}/runs`;
  const record = async (what: string, call: () => Promise<Answer>): Promise<Answer | undefined> => {
    const started = performance.now();
    try {
      const res = await call();
      result.answers.push({ what, status: res.status, code: res.body?.code, ms: performance.now() - started });
      return res;
    } catch (err) {
      result.failures.push(`${what}: ${(err as Error).message}`);
      await sleep(20);
      return undefined;
    }
  };
  const loop = async (step: () => Promise<void>) => {
    while (!stop()) await step();
  };
  const submitter = () =>
    loop(async () => {
      const res = await record('submit', () =>
        instances.call('POST', runsPath, {
          token: a.owner,
          idempotent: true,
          body: {
            jobs: [
              {
                spec: { commands: ['true'], image: 'python:3.12', resources: { cpu: 1, memory_mib: 64 } },
                replicas: options.replicas ?? 2,
              },
            ],
          },
        }),
      );
      if (res?.status === 201) result.runs.push(res.body.id);
      else if (res && res.status >= 500) await sleep(50);
    });
  const worker = (n: number) =>
    loop(async () => {
      const workerId = `load-${n}`;
      const post = (path: string, body: object) =>
        instances.call('POST', `/internal/v1/submissions${path}`, { token: a.service, body, safe: true });
      const claimed = await record('claim', () =>
        post('/claim', {
          worker_id: workerId,
          capacity: { cpu: 64, memory_mib: 65536, gpu: 0 },
          capabilities: { container_runtime: 'simulated' },
          limit: 4,
        }),
      );
      if (claimed?.status !== 200) return void (await sleep(50));
      const subs = claimed.body.submissions as { id: string }[];
      for (const s of subs) {
        const running = await record('running', () =>
          post(`/${s.id}/running`, { worker_id: workerId, provisioning_data: {} }),
        );
        if (running?.status !== 200) continue;
        const done = await record('complete', () =>
          post(`/${s.id}/complete`, {
            worker_id: workerId,
            status: 'done',
            termination_reason: 'done_by_runner',
            exit_status: 0,
          }),
        );
        if (done?.status === 200) result.completed.push(s.id);
      }
      if (subs.length === 0) await sleep(20);
    });
  const lister = () =>
    loop(async () => {
      await record('list', () => instances.call('GET', `${runsPath}?limit=20`, { token: a.owner }));
      const id = result.runs[Math.floor(Math.random() * result.runs.length)];
      if (id) await record('get', () => instances.call('GET', `${runsPath}/${id}?jobs_limit=5`, { token: a.owner }));
    });
  await Promise.all([
    ...Array.from({ length: options.submitters ?? 2 }, () => submitter()),
    ...Array.from({ length: options.workers ?? 2 }, (_, n) => worker(n)),
    ...Array.from({ length: options.listers ?? 1 }, () => lister()),
  ]);
  return result;
}

/** Counts of answers by "what status code". */
export function summary(answers: LoadRecord[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const a of answers) {
    const key = `${a.what} ${a.status}${a.code ? ` ${a.code}` : ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** Acknowledged writes that the database does not show: runs missing, completed submissions not `done`. */
export async function lostWrites(sql: Client, result: LoadResult): Promise<{ runs: string[]; completed: string[] }> {
  const runs = await sql.query<{ id: string }>(`SELECT id FROM runs WHERE id = ANY($1::uuid[])`, [result.runs]);
  const present = new Set(runs.rows.map((r) => r.id));
  const done = await sql.query<{ id: string }>(
    `SELECT id FROM job_submissions WHERE id = ANY($1::uuid[]) AND status = $2`,
    [result.completed, 'done'],
  );
  const finished = new Set(done.rows.map((r) => r.id));
  return {
    runs: result.runs.filter((id) => !present.has(id)),
    completed: result.completed.filter((id) => !finished.has(id)),
  };
}

export async function setUpActors(instances: Instances): Promise<LoadActors & { admin: string }> {
  const owner = await instances.user();
  const service = await instances.user('service');
  const admin = await instances.user('admin');
  const project = await instances.call('POST', '/api/v1/projects', {
    token: owner.token,
    idempotent: true,
    body: { name: `load-${owner.name}` },
  });
  if (project.status !== 201) throw new Error(`creating a project: ${project.status} ${project.text}`);
  return { owner: owner.token, service: service.token, admin: admin.token, project: project.body.name };
}
