import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { DONE } from '../../bench/reference-worker';
import { LogShipper, type LogShipperOptions, type LogStreamName } from '../../src/worker/log-shipper';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { readLog } from '../support/logs';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { claimFor, makeWorker } from '../support/workers';

/**
 * The worker's log shipper against a real server: a child process's output shipped and read back through the
 * public route byte for byte; lost requests and lost answers resent and stored once; a 409 resynced from the
 * server's length; the quota stops it and says so.
 */
describe('log shipper', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  let url: string;

  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${((t.app.getHttpServer() as Server).address() as AddressInfo).port}`;
    owner = await t.user();
    service = await t.user('service');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  /** A claimed, running submission and a shipper for it. */
  async function shipping(options: Partial<LogShipperOptions> = {}, app = { t, service, project, url }) {
    // Claimed ahead of whatever earlier test files left queued in this database.
    const run = await makeRun(app.t, owner, app.project, { priority: 1000, jobs: [{ spec: jobSpec() }] });
    const worker = makeWorker(app.t, app.service, uniqueName('w'));
    const [s] = await claimFor(worker, run.id);
    expect((await worker.running(s.id)).status).toBe(200);
    const warnings: string[] = [];
    const shipper = new LogShipper({
      url: app.url,
      token: app.service.token,
      submissionId: s.id,
      workerId: worker.workerId,
      retryMinMs: 5,
      retryMaxMs: 50,
      onWarning: (w) => warnings.push(w),
      ...options,
    });
    const path = `/api/v1/projects/${app.project}/runs/${run.id}/jobs/${run.jobs[0].id}/logs`;
    return { run, worker, s, shipper, path, warnings };
  }

  const chunkRows = async (submissionId: string) =>
    (
      await t.dataSource.query(
        `SELECT stream, count(*)::int AS n, max(length) AS biggest FROM log_chunks WHERE submission_id = $1
          GROUP BY stream ORDER BY stream`,
        [submissionId],
      )
    ).map((r: { stream: string; n: number; biggest: number }) => ({ ...r, biggest: Number(r.biggest) }));

  it("ships a process's 200,000 lines of stdout and stderr; they read back byte for byte, in order", async () => {
    const { worker, s, shipper, path, warnings } = await shipping();
    const script =
      'for ((i=0;i<100000;i++)); do echo "out $i héllo"; echo "err $i" >&2; done; printf \'\\xff\\xfe\\x00end\\n\'';
    const child = spawn('bash', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    const captured: Record<LogStreamName, Buffer[]> = { stdout: [], stderr: [] };
    child.stdout.on('data', (b: Buffer) => (captured.stdout.push(b), shipper.write('stdout', b)));
    child.stderr.on('data', (b: Buffer) => (captured.stderr.push(b), shipper.write('stderr', b)));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    await shipper.close();
    expect((await worker.complete(s.id, DONE)).status).toBe(200);

    const expected = {
      stdout: Buffer.concat([
        Buffer.from(Array.from({ length: 100_000 }, (_, i) => `out ${i} héllo\n`).join('')),
        Buffer.from([0xff, 0xfe, 0x00, ...Buffer.from('end\n')]),
      ]),
      stderr: Buffer.from(Array.from({ length: 100_000 }, (_, i) => `err ${i}\n`).join('')),
    };
    expect(Buffer.concat(captured.stdout).equals(expected.stdout)).toBe(true);
    expect(Buffer.concat(captured.stderr).equals(expected.stderr)).toBe(true);
    const log = await readLog(t, owner, path);
    expect(log.stdout.length).toBe(expected.stdout.length);
    expect(log.stdout.equals(expected.stdout)).toBe(true);
    expect(log.stderr.equals(expected.stderr)).toBe(true);
    expect(log.lastCursor).toBeNull();
    // One stream at a time, in byte order, reads the same.
    expect((await readLog(t, owner, path, { stream: 'stderr' })).stderr.equals(expected.stderr)).toBe(true);
    // Batched: chunks of at most 1 MiB, not one per line; text chunks cut between characters read as text.
    const rows = await chunkRows(s.id);
    for (const r of rows) expect(r.biggest).toBeLessThanOrEqual(1024 * 1024);
    expect(rows.reduce((n: number, r: { n: number }) => n + r.n, 0)).toBeLessThan(200);
    expect(log.items.filter((i) => i.encoding === 'base64').length).toBe(1); // only the chunk with \xff\xfe\x00
    expect(shipper.accepted).toEqual({ stdout: expected.stdout.length, stderr: expected.stderr.length });
    expect([shipper.quotaExceeded, shipper.failure, shipper.dropped, warnings]).toEqual([false, undefined, 0, []]);
  });

  it('batches by time: output trickling in is sent every flush interval, before any close()', async () => {
    const { worker, s, shipper, path } = await shipping({ flushIntervalMs: 100 });
    for (let i = 0; i < 50; i++) {
      shipper.write('stdout', Buffer.from(`tick ${i}\n`));
      await new Promise((r) => setTimeout(r, 10));
    }
    await new Promise((r) => setTimeout(r, 300));
    // Delivered by the timer alone (no close yet).
    const before = await readLog(t, owner, path);
    expect(before.stdout.toString()).toBe(Array.from({ length: 50 }, (_, i) => `tick ${i}\n`).join(''));
    const [rows] = await chunkRows(s.id);
    expect(rows.n).toBeGreaterThan(1);
    expect(rows.n).toBeLessThan(20);
    await shipper.close();
    await worker.complete(s.id, DONE);
  });

  it('asks a fast writer to wait past its high-water mark, and says when there is room again', async () => {
    const { worker, s, shipper, path } = await shipping({ highWaterBytes: 256 * 1024, maxChunkBytes: 64 * 1024 });
    const line = Buffer.from(`${'z'.repeat(1023)}\n`);
    const written: Buffer[] = [];
    let waits = 0;
    // A writer that honours whenWritable, as the executor does with a job's pipe: 4 MiB, never more than the
    // high-water mark (plus one write) waiting.
    for (let i = 0; i < 4096; i++) {
      shipper.write('stdout', line);
      written.push(line);
      const room = shipper.whenWritable('stdout');
      if (room) {
        waits++;
        await room;
        expect(shipper.whenWritable('stdout')).toBeUndefined();
      }
    }
    expect(waits).toBeGreaterThan(0);
    await shipper.close();
    expect((await readLog(t, owner, path)).stdout.equals(Buffer.concat(written))).toBe(true);
    expect([shipper.dropped, shipper.failure]).toEqual([0, undefined]);
    // A stopped or closed shipper never asks anyone to wait.
    expect(shipper.whenWritable('stdout')).toBeUndefined();
    await worker.complete(s.id, DONE);
  });

  it('resends what the network lost (requests and answers alike); every byte is stored once', async () => {
    let calls = 0;
    const flaky = async (input: Request): Promise<Response> => {
      const n = ++calls;
      if (n % 4 === 1) throw new TypeError('fetch failed (request lost)');
      const res = await fetch(input);
      if (n % 4 === 2) throw new TypeError('fetch failed (answer lost)'); // stored, but the shipper never hears
      if (n % 7 === 0) return new Response(JSON.stringify({ code: 'DATABASE_UNAVAILABLE' }), { status: 503 });
      return res;
    };
    const { worker, s, shipper, path } = await shipping({ fetch: flaky, flushBytes: 500, maxChunkBytes: 1000 });
    const expected: Record<LogStreamName, Buffer[]> = { stdout: [], stderr: [] };
    for (let i = 0; i < 300; i++) {
      const stream: LogStreamName = i % 2 ? 'stdout' : 'stderr';
      const bytes = Buffer.from(Array.from({ length: 97 }, (_, k) => (i * 31 + k * 7) % 256));
      expected[stream].push(bytes);
      shipper.write(stream, bytes);
      if (i % 50 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    await shipper.close();
    expect(calls).toBeGreaterThan(40);
    const log = await readLog(t, owner, path);
    expect(log.stdout.equals(Buffer.concat(expected.stdout))).toBe(true);
    expect(log.stderr.equals(Buffer.concat(expected.stderr))).toBe(true);
    // Stored once: the chunks tile each stream exactly (readLog checks they are contiguous), no byte twice.
    const [{ bytes }] = await t.dataSource.query(
      `SELECT sum(length)::int AS bytes FROM log_chunks WHERE submission_id = $1`,
      [s.id],
    );
    expect(bytes).toBe(300 * 97);
    expect(shipper.failure).toBeUndefined();
    await worker.complete(s.id, DONE);
  });

  it("resyncs from a 409's accepted length: bytes the server already holds are not sent again", async () => {
    const { worker, s, shipper, path, warnings } = await shipping();
    // An earlier writer (a previous shipper of this submission) stored bytes that differ from what this one has.
    await t.http
      .post(`/internal/v1/submissions/${s.id}/logs`)
      .set(service.auth)
      .send({ worker_id: worker.workerId, stream: 'stdout', offset: 0, data: 'AAAA' })
      .expect(200);
    shipper.write('stdout', Buffer.from('BBBB'));
    shipper.write('stdout', Buffer.from('CC\n'));
    await shipper.close();
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('AAAACC\n');
    expect(shipper.accepted.stdout).toBe(7);
    expect(warnings).toEqual([]);
    await worker.complete(s.id, DONE);
  });

  it('stops at once when the submission is not held by this worker; nothing is stored', async () => {
    const { worker, s, shipper, path, warnings } = await shipping({ workerId: 'not-the-holder' });
    shipper.write('stdout', Buffer.from('hello\n'));
    await shipper.close();
    expect(shipper.failure).toContain('STALE_SUBMISSION');
    expect(warnings.join('\n')).toContain('STALE_SUBMISSION');
    expect(shipper.dropped).toBe(6);
    expect((await readLog(t, owner, path)).items).toEqual([]);
    await worker.complete(s.id, DONE);
  });

  describe('with a small quota', () => {
    let q: TestApp;
    let qService: TestUser;
    let qProject: string;
    let qUrl: string;
    beforeAll(async () => {
      q = await createTestApp({ RUNPLANE_LOG_QUOTA_BYTES: '10000' });
      await q.app.listen(0, '127.0.0.1');
      qUrl = `http://127.0.0.1:${((q.app.getHttpServer() as Server).address() as AddressInfo).port}`;
      qService = await q.user('service');
      qProject = (await makeProject(q, owner)).name;
    });
    afterAll(() => q.close());

    it('stops at the quota, keeping its worth: quotaExceeded and quotaReached tell the executor', async () => {
      const { worker, s, shipper, path } = await shipping(
        { flushBytes: 1000 },
        { t: q, service: qService, project: qProject, url: qUrl },
      );
      let told = false;
      void shipper.quotaReached.then(() => (told = true));
      for (let i = 0; i < 100 && !shipper.quotaExceeded; i++) {
        shipper.write('stdout', Buffer.from(`${'x'.repeat(199)}\n`));
        await new Promise((r) => setImmediate(r));
      }
      await shipper.quotaReached;
      expect([shipper.quotaExceeded, told]).toEqual([true, true]);
      shipper.write('stdout', Buffer.from('after the quota\n'));
      await shipper.close();
      expect(shipper.dropped).toBeGreaterThan(0);
      expect(
        (await worker.complete(s.id, { status: 'failed', termination_reason: 'log_quota_exceeded', exit_status: 137 }))
          .status,
      ).toBe(200);
      const log = await readLog(q, owner, path);
      // The quota's worth is kept: the part of the refused chunk that fitted was sent on its own.
      expect(log.stdout.toString()).toBe(`${'x'.repeat(199)}\n`.repeat(50));
      expect(shipper.accepted.stdout).toBe(10_000);
    });
  });
});
