import { jobSpec, makeProject, makeRun } from '../support/factories';
import { readLog } from '../support/logs';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { claimFor, makeWorker } from '../support/workers';

const MiB = 1024 * 1024;

/**
 * The binary form of a log append: `POST /internal/v1/submissions/{id}/logs/{stream}?worker_id=&offset=` with the
 * bytes as an application/octet-stream body (what the runplane worker sends). The same rules as the JSON form.
 */
describe('logs: the binary append', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;

  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    service = await t.user('service');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  async function started() {
    const run = await makeRun(t, owner, project, { priority: 1000, jobs: [{ spec: jobSpec() }] });
    const worker = makeWorker(t, service, uniqueName('w'));
    const [s] = await claimFor(worker, run.id);
    expect((await worker.running(s.id)).status).toBe(200);
    return { worker, s, path: `/api/v1/projects/${project}/runs/${run.id}/jobs/${run.jobs[0].id}/logs` };
  }

  const put = (id: string, stream: string, query: Record<string, string | number>, bytes: Buffer | string) =>
    t.http
      .post(`/internal/v1/submissions/${id}/logs/${stream}`)
      .query(query)
      .set(service.auth)
      .set('Content-Type', 'application/octet-stream')
      .send(bytes);

  const stored = async (id: string) =>
    (await t.dataSource.query(`SELECT count(*)::int AS n FROM log_chunks WHERE submission_id = $1`, [id]))[0].n;

  it('stores any bytes as sent, at offsets shared with the JSON form; a resend is stored once', async () => {
    const { worker, s, path } = await started();
    const binary = Buffer.from([0xff, 0x00, 0x41, 0xc3, 0x0a]);
    const q = (offset: number) => ({ worker_id: worker.workerId, offset });
    let res = await put(s.id, 'stdout', q(0), binary).expect(200);
    expect(res.body).toEqual({ stream: 'stdout', accepted_length: 5, stored_bytes: 5 });
    res = await put(s.id, 'stdout', q(0), binary).expect(200);
    expect(res.body).toEqual({ stream: 'stdout', accepted_length: 5, stored_bytes: 0 });
    await t.http
      .post(`/internal/v1/submissions/${s.id}/logs`)
      .set(service.auth)
      .send({ worker_id: worker.workerId, stream: 'stdout', offset: 5, data: 'text\n' })
      .expect(200);
    await put(s.id, 'stdout', q(10), Buffer.from('more\n')).expect(200);
    await put(s.id, 'stderr', q(0), Buffer.from('err\n')).expect(200);
    const gap = await put(s.id, 'stderr', q(9), Buffer.from('x')).expect(409);
    expect(gap.body.code).toBe('LOG_OFFSET_GAP');
    expect(gap.body.details[0].accepted_length).toBe(4);
    const mismatch = await put(s.id, 'stderr', q(0), Buffer.from('ERR\n')).expect(409);
    expect(mismatch.body.code).toBe('LOG_DATA_MISMATCH');

    const log = await readLog(t, owner, path);
    expect(log.stdout.equals(Buffer.concat([binary, Buffer.from('text\nmore\n')]))).toBe(true);
    expect(log.stderr.toString()).toBe('err\n');
    expect(await stored(s.id)).toBe(4);
  });

  it('an empty body stores nothing and answers the accepted length; 1 MiB is taken, more is a 413', async () => {
    const { worker, s } = await started();
    const q = { worker_id: worker.workerId, offset: 0 };
    expect((await put(s.id, 'stdout', q, Buffer.alloc(0)).expect(200)).body).toEqual({
      stream: 'stdout',
      accepted_length: 0,
      stored_bytes: 0,
    });
    const big = await put(s.id, 'stdout', q, Buffer.alloc(MiB + 1, 1)).expect(413);
    expect(big.body.code).toBe('PAYLOAD_TOO_LARGE');
    expect(await stored(s.id)).toBe(0);
    await put(s.id, 'stdout', q, Buffer.alloc(MiB, 1)).expect(200);
    expect(await stored(s.id)).toBe(1);
  });

  it('bad requests are refused naming what is wrong, and store nothing', async () => {
    const { worker, s } = await started();
    const ok = { worker_id: worker.workerId, offset: 0 };
    const bytes = Buffer.from('x');
    const fields: [Record<string, string | number>, string][] = [
      [{ ...ok, offset: -1 }, 'offset'],
      [{ ...ok, offset: '1.5' }, 'offset'],
      [{ ...ok, offset: 2 ** 31 }, 'offset'],
      [{ worker_id: worker.workerId }, 'offset'],
      [{ offset: 0 }, 'worker_id'],
      [{ ...ok, extra: 1 }, 'extra'],
    ];
    for (const [query, field] of fields) {
      const res = await put(s.id, 'stdout', query, bytes);
      expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    // A JSON body is not the bytes of a chunk.
    const json = await t.http
      .post(`/internal/v1/submissions/${s.id}/logs/stdout`)
      .query(ok)
      .set(service.auth)
      .send({ data: 'x' });
    expect([json.status, json.body.details?.[0]?.field]).toEqual([400, 'body']);
    expect((await put(s.id, 'stdin', ok, bytes)).status).toBe(404);
    // Bytes sent to a route that takes a JSON object (the JSON form, a run submission) are refused the same way.
    for (const path of [`/internal/v1/submissions/${s.id}/logs`, `/api/v1/projects/${project}/runs`]) {
      const res = await t.http
        .post(path)
        .set(path.startsWith('/internal') ? service.auth : owner.auth)
        .set('Content-Type', 'application/octet-stream')
        .send(Buffer.from('{"jobs": []}'));
      expect([res.status, res.body.details?.[0]?.field]).toEqual([400, 'body']);
    }
    // Not the holder: another worker id of the same account.
    const stale = await put(s.id, 'stdout', { ...ok, worker_id: uniqueName('other') }, bytes);
    expect([stale.status, stale.body.code]).toEqual([409, 'STALE_SUBMISSION']);
    expect(await stored(s.id)).toBe(0);
  });
});
