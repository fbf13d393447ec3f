import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { TerminationReason } from '../src/modules/lifecycle/vocabulary';
/**
 * A reference worker: drives runplane's internal API over HTTP exactly like a real worker would (claim, running,
 * heartbeats, complete). Used by the tests and the benchmarks; `post` is any HTTP client (fetch, supertest).
 */
export type Post = (path: string, body: unknown) => Promise<{ status: number; body: JsonBody }>;

/** A response body: JSON of whatever shape the route answers, read field by field by callers that know the route. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any route's JSON; `unknown` would need a cast per read
export type JsonBody = any;

/**
 * A worker's HTTP client as a real worker would hold one: node:http over keep-alive connections, JSON in and out.
 * (Cheaper per request than fetch, whose streams machinery would otherwise eat into the CPU the server under
 * test shares with in-process bench workers.)
 */
export function httpPost(baseUrl: string, token: string): Post {
  const agent = new Agent({ keepAlive: true });
  const base = new URL(baseUrl);
  return (path, body) =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      const req = request(
        {
          agent,
          host: base.hostname,
          port: base.port,
          path,
          method: 'POST',
          headers: {
            Authorization: `Bearer ${token}`,
            'Content-Type': 'application/json',
            'Content-Length': Buffer.byteLength(payload),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            try {
              resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null });
            } catch (err) {
              reject(new Error(`POST ${path} → ${res.statusCode}: not JSON: ${text.slice(0, 200)} (${String(err)})`));
            }
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
}

export interface Claimed {
  id: string;
  job_id: string;
  run_id: string;
  job_group_id: number;
  submission_num: number;
  lease_expires_at: string;
  job_name?: string;
}

/**
 * A final report. The server accepts only the (status, reason) pairs of the lifecycle table, and before `running`
 * only a failure to start, a cancellation or an abort: `execute` reports `running` first for anything else.
 */
export type Outcome =
  | { status: 'done'; termination_reason: 'done_by_runner'; exit_status?: number }
  | { status: 'failed'; termination_reason: TerminationReason; exit_status?: number }
  | { status: 'terminated' | 'aborted'; termination_reason: TerminationReason };

export const DONE: Outcome = { status: 'done', termination_reason: 'done_by_runner', exit_status: 0 };
export const ERROR: Outcome = { status: 'failed', termination_reason: 'container_exited_with_error', exit_status: 1 };
export const NO_CAPACITY: Outcome = { status: 'failed', termination_reason: 'failed_to_start_due_to_no_capacity' };

/** It runs nothing, so it may take any job: it declares a container runtime to be handed jobs with an image too. */
const SIMULATED = { container_runtime: 'simulated' };

export class ReferenceWorker {
  constructor(
    private readonly post: Post,
    readonly workerId: string,
    private readonly capacity = { cpu: 64, memory_mib: 256 * 1024, gpu: 8 },
    private readonly capabilities: { container_runtime?: string } = SIMULATED,
  ) {}

  async claim(limit = 1): Promise<Claimed[]> {
    const res = await this.post('/internal/v1/submissions/claim', {
      worker_id: this.workerId,
      capacity: this.capacity,
      limit,
      capabilities: this.capabilities,
    });
    if (res.status !== 200) throw new Error(`claim: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.submissions;
  }

  running(id: string, provisioning_data: Record<string, unknown> = { instance: this.workerId }) {
    return this.post(`/internal/v1/submissions/${id}/running`, { worker_id: this.workerId, provisioning_data });
  }

  heartbeat(id: string) {
    return this.post(`/internal/v1/submissions/${id}/heartbeat`, { worker_id: this.workerId });
  }

  complete(id: string, outcome: Outcome) {
    return this.post(`/internal/v1/submissions/${id}/complete`, { worker_id: this.workerId, ...outcome });
  }

  /** Runs one claimed submission to the end: running, a heartbeat (stopping early if cancel is requested), complete. */
  async execute(s: Claimed, outcome: Outcome): Promise<{ status: number; body: JsonBody; cancelled: boolean }> {
    // A job that could not start never reports running (the one such outcome the tests and benches use).
    if (outcome.termination_reason !== 'failed_to_start_due_to_no_capacity') {
      const r = await this.running(s.id);
      if (r.status !== 200) throw new Error(`running: ${r.status} ${JSON.stringify(r.body)}`);
      const hb = await this.heartbeat(s.id);
      if (hb.status !== 200) throw new Error(`heartbeat: ${hb.status} ${JSON.stringify(hb.body)}`);
      if (hb.body.cancel_requested) {
        const res = await this.complete(s.id, { status: 'terminated', termination_reason: 'job_group_cancelled' });
        return { ...res, cancelled: true };
      }
    }
    return { ...(await this.complete(s.id, outcome)), cancelled: false };
  }
}

/**
 * The untimed set-up of a throughput benchmark: every worker claims (`claim` at a time) until the queue is empty, or
 * it holds `each`, and reports each claimed submission running, one call each. Returns what each worker holds.
 *
 * `each` keeps the holds even where workers start at different speeds: a worker that claims again sooner takes,
 * without a cap, more than its share; the timed phase would then end with that worker alone, at one request at a
 * time, and measure its tail rather than the workers together.
 */
export async function claimAndStartAll(
  workers: ReferenceWorker[],
  { claim = 50, each = Infinity }: { claim?: number; each?: number } = {},
): Promise<Claimed[][]> {
  const held: Claimed[][] = workers.map(() => []);
  const fill = async (w: ReferenceWorker, i: number) => {
    while (held[i].length < each) {
      const got = await w.claim(Math.min(claim, each - held[i].length));
      if (got.length === 0) return;
      for (const s of got) {
        const r = await w.running(s.id);
        if (r.status !== 200) throw new Error(`running: ${r.status} ${JSON.stringify(r.body)}`);
      }
      held[i].push(...got);
    }
  };
  await Promise.all(workers.map(fill));
  // A claim may come back empty while the others' claims hold the last rows (they skip locked rows); with a cap,
  // what those leave must then go to the workers short of it, one worker at a time.
  if (each !== Infinity) for (const [i, w] of workers.entries()) await fill(w, i);
  return held;
}

/**
 * One timed phase of a benchmark: every worker sends `report` for each submission it holds, all workers at once.
 * Returns the wall time and the answers counted by HTTP status.
 */
export async function timedReports(
  workers: ReferenceWorker[],
  held: Claimed[][],
  report: (w: ReferenceWorker, s: Claimed, k: number) => Promise<{ status: number }>,
): Promise<{ seconds: number; statuses: Map<number, number> }> {
  const statuses = new Map<number, number>();
  const started = performance.now();
  await Promise.all(
    workers.map(async (w, i) => {
      for (const [k, s] of held[i].entries()) {
        const res = await report(w, s, k);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    }),
  );
  return { seconds: (performance.now() - started) / 1000, statuses };
}
