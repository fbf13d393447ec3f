import type { Server } from 'node:http';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, TestApp, TestUser } from '../support/test-app';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

/**
 * Responses compressed when the client accepts it: JSON of 1 KiB or more (brotli preferred, then gzip), never event
 * streams. Raw HTTP, so the bytes on the wire are what is checked.
 */
describe('response compression', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  let port: number;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
    const server = t.app.getHttpServer() as Server;
    if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => t.close());

  /** A GET with these headers; with `firstBytes`, resolves as soon as the body has begun (then closes). */
  const get = (path: string, headers: Record<string, string>, firstBytes = false) =>
    new Promise<Raw>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port, path, headers: { authorization: owner.auth.Authorization, ...headers } },
        (res) => {
          const chunks: Buffer[] = [];
          const done = () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
          res.on('data', (c: Buffer) => {
            chunks.push(c);
            if (firstBytes) {
              done();
              req.destroy();
            }
          });
          res.on('end', done);
        },
      );
      req.on('error', (err) => (firstBytes ? undefined : reject(err)));
      req.end();
    });

  it('a large JSON answer is gzip or brotli as accepted, the same document as uncompressed', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 30 }] });
    const path = `/api/v1/projects/${project}/runs/${run.id}`;
    const plain = await get(path, { 'accept-encoding': 'identity' });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.length).toBeGreaterThan(4096);
    const gzip = await get(path, { 'accept-encoding': 'gzip' });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.headers.vary).toMatch(/accept-encoding/i);
    expect(JSON.parse(gunzipSync(gzip.body).toString())).toEqual(JSON.parse(plain.body.toString()));
    expect(gzip.body.length).toBeLessThan(plain.body.length / 3);
    const br = await get(path, { 'accept-encoding': 'gzip, deflate, br' });
    expect(br.headers['content-encoding']).toBe('br');
    expect(JSON.parse(brotliDecompressSync(br.body).toString())).toEqual(JSON.parse(plain.body.toString()));
  });

  it('an answer under 1 KiB and the error shape stay as they are', async () => {
    const small = await get(`/api/v1/projects/${project}`, { 'accept-encoding': 'gzip, br' });
    expect(small.status).toBe(200);
    expect(small.body.length).toBeLessThan(1024);
    expect(small.headers['content-encoding']).toBeUndefined();
    const missing = await get(`/api/v1/projects/${project}/runs/00000000-0000-4000-8000-000000000000`, {
      'accept-encoding': 'gzip',
    });
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body.toString())).toMatchObject({ code: 'NOT_FOUND' });
  });

  it('an event stream is never compressed: its first bytes arrive as written', async () => {
    const res = await get(
      `/api/v1/projects/${project}/events`,
      { accept: 'text/event-stream', 'accept-encoding': 'gzip, br' },
      true,
    );
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.body.toString()).toMatch(/^retry: /);
  });
});
