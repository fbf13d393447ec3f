import { createRunplaneClient, type RunplaneClient, type Schemas } from '../client';
import { workerFetch } from './http-fetch';
import type { FinalReport } from './outcome';

export type ClaimedSubmission = Schemas['ClaimedSubmissionView'];
export type HeartbeatItem = Schemas['HeartbeatBatchItemView'];
export interface Capacity {
  cpu: number;
  memory_mib: number;
  gpu: number;
}

/** The server refused the worker's token (401) or its role (403): nothing will work until that is fixed. */
export class TokenRefusedError extends Error {}

/** A report's fate: accepted, or refused for good (the worker does not hold the submission: 404/409, or 4xx). */
export type Delivery = 'accepted' | 'refused';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A `running` or `complete` report waiting for the next send (see WorkerApi.send). */
interface DueReport {
  kind: 'running' | 'complete';
  id: string;
  body: Record<string, unknown>;
  what: string;
  deadline: () => number;
  /** The report alone, on its own route (a lone report, and every retry). */
  alone: () => Promise<{ response: Response; error?: unknown }>;
  resolve: (d: Delivery | null) => void;
  reject: (err: unknown) => void;
}

/** An answer worth retrying: the server is starting, busy, rate-limiting, or unreachable. */
const transient = (status: number) => status === 408 || status === 429 || status >= 500;

/**
 * The worker's side of the internal API, over the typed client (src/client): claim, running, the batched
 * heartbeat, complete. Only the internal API, only HTTP. Reports are retried with backoff while the server is
 * unreachable or busy, until accepted, refused, or their deadline passes.
 */
export class WorkerApi {
  private readonly client: RunplaneClient;
  private due: DueReport[] = [];

  constructor(
    url: string,
    token: string,
    readonly workerId: string,
    private readonly warn: (msg: string) => void = () => undefined,
  ) {
    this.client = createRunplaneClient(url, token, { fetch: workerFetch });
  }

  /** Queued submissions that fit `capacity`; throws when the server can't be asked now (the caller waits). */
  async claim(capacity: Capacity, limit: number, containerRuntime?: string): Promise<ClaimedSubmission[]> {
    const { data, error, response } = await this.client.POST('/internal/v1/submissions/claim', {
      body: {
        worker_id: this.workerId,
        capacity,
        limit,
        ...(containerRuntime ? { capabilities: { container_runtime: containerRuntime } } : {}),
      },
    });
    this.checkToken(response.status);
    if (!data) throw new Error(`claim: ${response.status} ${JSON.stringify(error)}`);
    return data.submissions;
  }

  async running(
    id: string,
    provisioningData: Record<string, unknown>,
    deadline: () => number,
  ): Promise<Delivery | null> {
    const body = { provisioning_data: provisioningData };
    return this.send('running', id, body, deadline, () =>
      this.client.POST('/internal/v1/submissions/{id}/running', {
        params: { path: { id } },
        body: { worker_id: this.workerId, ...body },
      }),
    );
  }

  async complete(id: string, report: FinalReport, deadline: () => number): Promise<Delivery | null> {
    return this.send('complete', id, { ...report }, deadline, () =>
      this.client.POST('/internal/v1/submissions/{id}/complete', {
        params: { path: { id } },
        body: { worker_id: this.workerId, ...report } as Schemas['CompleteDto'],
      }),
    );
  }

  /**
   * Queues a report for this turn of the event loop: the reports due together (jobs ending at once, a stop, the
   * reports after a restart) go in one POST /internal/v1/submissions/reports, a lone one on its own route. A report
   * the batch could not settle (the server busy or away, or a server without the batch route) is retried alone.
   */
  private send(
    kind: DueReport['kind'],
    id: string,
    body: Record<string, unknown>,
    deadline: () => number,
    alone: DueReport['alone'],
  ): Promise<Delivery | null> {
    return new Promise((resolve, reject) => {
      this.due.push({ kind, id, body, what: `${kind} ${id}`, deadline, alone, resolve, reject });
      if (this.due.length === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.due;
    this.due = [];
    const retryAlone = (d: DueReport) => this.deliver(d.what, d.deadline, d.alone).then(d.resolve, d.reject);
    if (batch.length === 1) return retryAlone(batch[0]);
    let results: { status_code: number; body?: unknown }[] | undefined;
    try {
      const { data, error, response } = await this.client.POST('/internal/v1/submissions/reports', {
        body: {
          worker_id: this.workerId,
          reports: batch.map((d) => ({ submission_id: d.id, kind: d.kind, ...d.body })),
        },
      });
      this.checkToken(response.status);
      results = data?.results;
      if (!results) this.warn(`reports: ${response.status} ${JSON.stringify(error)}, sending them one by one`);
    } catch (err) {
      if (err instanceof TokenRefusedError) {
        for (const d of batch) d.reject(err);
        return;
      }
      this.warn(`reports: ${String(err)}, sending them one by one`);
    }
    await Promise.all(
      batch.map((d, i) => {
        const r = results?.[i];
        if (r?.status_code === 200) d.resolve('accepted');
        else if (r && !transient(r.status_code)) {
          // 404/409: the submission is no longer this worker's; anything else would fail again the same way.
          if (r.status_code !== 404 && r.status_code !== 409)
            this.warn(`${d.what}: refused ${r.status_code} ${JSON.stringify(r.body)}`);
          d.resolve('refused');
        } else return retryAlone(d);
        return undefined;
      }),
    );
  }

  /** One heartbeat for all of `ids`; null when the server could not be reached (the next one will try again). */
  async heartbeat(ids: string[]): Promise<HeartbeatItem[] | null> {
    try {
      const { data, error, response } = await this.client.POST('/internal/v1/workers/{worker_id}/heartbeat', {
        params: { path: { worker_id: this.workerId } },
        body: { submissions: ids },
      });
      this.checkToken(response.status);
      if (data) return data.submissions;
      this.warn(`heartbeat: ${response.status} ${JSON.stringify(error)}`);
    } catch (err) {
      if (err instanceof TokenRefusedError) throw err;
      this.warn(`heartbeat: ${String(err)}`);
    }
    return null;
  }

  /**
   * Sends a report until it is accepted or refused; null when the deadline (asked again before each retry: it may
   * move closer, e.g. when the worker stops) passed first. Backoff from 100 ms, doubling up to 5 s.
   */
  private async deliver(
    what: string,
    deadline: () => number,
    send: () => Promise<{ response: Response; error?: unknown }>,
  ): Promise<Delivery | null> {
    for (let wait = 100; ; wait = Math.min(wait * 2, 5000)) {
      try {
        const { response, error } = await send();
        this.checkToken(response.status);
        if (response.ok) return 'accepted';
        if (!transient(response.status)) {
          // 404/409: the submission is no longer this worker's; anything else would fail again the same way.
          if (response.status !== 404 && response.status !== 409)
            this.warn(`${what}: refused ${response.status} ${JSON.stringify(error)}`);
          return 'refused';
        }
        this.warn(`${what}: ${response.status}, retrying`);
      } catch (err) {
        if (err instanceof TokenRefusedError) throw err;
        this.warn(`${what}: ${String(err)}, retrying`);
      }
      if (Date.now() + wait > deadline()) return null;
      await sleep(wait);
    }
  }

  private checkToken(status: number): void {
    if (status === 401 || status === 403)
      throw new TokenRefusedError(
        status === 401
          ? 'the server refused the token (401): pass a service account token with --token or RUNPLANE_TOKEN'
          : 'the token is not a service account token (403): workers need one (global role "service")',
      );
  }
}
