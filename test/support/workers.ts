import { Claimed, DONE, type JsonBody, ReferenceWorker } from '../../bench/reference-worker';
import type { TestApp, TestUser } from './test-app';

/** A reference worker talking to the test app over supertest with a service account's token. */
export function makeWorker(t: Pick<TestApp, 'http'>, service: TestUser, workerId: string): ReferenceWorker {
  return new ReferenceWorker(async (path, body) => {
    const res = await t.http
      .post(path)
      .set(service.auth)
      .send(body as object);
    return { status: res.status, body: res.body };
  }, workerId);
}

/** The size of every batch the batching workers sent (what a test checks batching against). */
export const reportBatchSizes: number[] = [];

/**
 * A reference worker whose running, heartbeat and complete reports go through POST /internal/v1/submissions/reports:
 * the reports it has due at once (sent in the same turn of the event loop) travel in one batch, and each caller gets
 * its report's result as the single route would have answered it (status, and the answer or the error body).
 */
export function makeBatchingWorker(t: Pick<TestApp, 'http'>, service: TestUser, workerId: string): ReferenceWorker {
  const single = (path: string, body: unknown) =>
    t.http
      .post(path)
      .set(service.auth)
      .send(body as object)
      .then((res) => ({ status: res.status, body: res.body }));
  type Due = {
    report: object;
    resolve: (r: { status: number; body: JsonBody }) => void;
    reject: (err: unknown) => void;
  };
  let due: Due[] = [];
  const flush = async () => {
    const batch = due;
    due = [];
    reportBatchSizes.push(batch.length);
    try {
      const res = await single('/internal/v1/submissions/reports', {
        worker_id: workerId,
        reports: batch.map((d) => d.report),
      });
      if (res.status !== 200) for (const d of batch) d.resolve(res);
      else
        (res.body.results as { status_code: number; body: object }[]).forEach((r, i) =>
          batch[i].resolve({ status: r.status_code, body: r.body }),
        );
    } catch (err) {
      for (const d of batch) d.reject(err);
    }
  };
  return new ReferenceWorker(async (path, body) => {
    const report = /^\/internal\/v1\/submissions\/([^/]+)\/(running|heartbeat|complete)$/.exec(path);
    if (!report) return single(path, body);
    // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the batch carries the worker id
    const { worker_id: _, ...rest } = body as Record<string, unknown>;
    return new Promise((resolve, reject) => {
      due.push({ report: { submission_id: report[1], kind: report[2], ...rest }, resolve, reject });
      if (due.length === 1) setImmediate(() => void flush());
    });
  }, workerId);
}

/**
 * Claims until it holds `n` submissions of one run (each spec file has its own database, but earlier tests of the
 * file may have left work queued ahead: that is run to completion out of the way). May return fewer when the queue runs
 * dry.
 */
export async function claimFor(w: ReferenceWorker, runId: string, n = 1): Promise<Claimed[]> {
  const mine: Claimed[] = [];
  for (let i = 0; i < 50 && mine.length < n; i++) {
    const got = await w.claim(n - mine.length);
    for (const s of got) {
      if (s.run_id === runId) mine.push(s);
      else await w.execute(s, DONE); // run to the end: `done` is refused for a submission that never ran
    }
    if (got.length === 0) break;
  }
  return mine;
}

export async function invariants(
  t: Pick<TestApp, 'http'>,
  admin: TestUser,
): Promise<{ ok: boolean; mismatches: unknown[] }> {
  return (await t.http.get('/admin/v1/invariants').set(admin.auth).expect(200)).body;
}
