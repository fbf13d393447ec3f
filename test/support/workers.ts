import { Claimed, DONE, ReferenceWorker } from '../../bench/reference-worker';
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
