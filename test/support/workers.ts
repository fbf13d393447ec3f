import { ReferenceWorker } from '../../bench/reference-worker';
import type { TestApp, TestUser } from './test-app';

/** A reference worker talking to the test app over supertest with a service account's token. */
export function makeWorker(t: TestApp, service: TestUser, workerId: string): ReferenceWorker {
  return new ReferenceWorker(async (path, body) => {
    const res = await t.http.post(path).set(service.auth).send(body as object);
    return { status: res.status, body: res.body };
  }, workerId);
}

export async function invariants(t: TestApp, admin: TestUser): Promise<{ ok: boolean; mismatches: unknown[] }> {
  return (await t.http.get('/admin/v1/invariants').set(admin.auth).expect(200)).body;
}
