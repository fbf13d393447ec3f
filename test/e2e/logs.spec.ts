import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { DONE, ERROR, ReferenceWorker } from '../../bench/reference-worker';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { bytesOf, followSse, LogItem, readLog, SseEvent } from '../support/logs';
import { createTestApp, embeddedOnly, TestApp, TestUser, uniqueName } from '../support/test-app';
import { claimFor, invariants, makeWorker } from '../support/workers';

const MiB = 1024 * 1024;

/**
 * Logs: workers append chunks of a submission's stdout and stderr at byte offsets (only the holder; repeats stored
 * once; gaps, disagreeing overlaps, bad chunks and chunks past the quota refused with nothing stored); users read
 * them in pages (cursors; both streams in the order written, or one in byte order) or follow them as SSE until the
 * submission ends; deleting a run deletes them.
 */
describe('logs', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  let baseUrl: string;

  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen(0, '127.0.0.1');
    baseUrl = `http://127.0.0.1:${((t.app.getHttpServer() as Server).address() as AddressInfo).port}`;
    owner = await t.user();
    service = await t.user('service');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  /** A run of one job, its submission claimed by a new worker and reported running. */
  async function started(body: Record<string, unknown> = {}, account = service) {
    // Claimed ahead of whatever earlier test files left queued in this database.
    const run = await makeRun(t, owner, project, { priority: 1000, jobs: [{ spec: jobSpec() }], ...body });
    const worker = makeWorker(t, account, uniqueName('w'));
    const [s] = await claimFor(worker, run.id);
    expect((await worker.running(s.id)).status).toBe(200);
    return { run, worker, s, path: logsPath(run) };
  }

  const logsPath = (run: RunResponse, jobId = run.jobs[0].id) =>
    `/api/v1/projects/${project}/runs/${run.id}/jobs/${jobId}/logs`;

  const post = (id: string, body: Record<string, unknown>, account = service) =>
    t.http.post(`/internal/v1/submissions/${id}/logs`).set(account.auth).send(body);

  const chunk = (w: ReferenceWorker, stream: string, offset: number, data: string | Buffer) =>
    typeof data === 'string'
      ? { worker_id: w.workerId, stream, offset, data }
      : { worker_id: w.workerId, stream, offset, data: data.toString('base64'), encoding: 'base64' };

  const storedRows = async (submissionId: string) =>
    Number(
      (
        await t.dataSource.query(`SELECT count(*)::int AS n FROM log_chunks WHERE submission_id = $1`, [submissionId])
      )[0].n,
    );

  it('appends chunks at offsets; they read back byte for byte (text as text, other bytes as base64)', async () => {
    const { worker, s, path } = await started();
    const binary = Buffer.from([0xff, 0x00, 0x41, 0xc3]); // not UTF-8, with a NUL
    const unicode = 'héllo wörld ✓ 🚀\r\n\ttabs\u001b[31mred\u001b[0m\n';
    let res = await post(s.id, chunk(worker, 'stdout', 0, unicode));
    expect(res.status).toBe(200);
    const n = Buffer.byteLength(unicode);
    expect(res.body).toEqual({ stream: 'stdout', accepted_length: n, stored_bytes: n });
    res = await post(s.id, chunk(worker, 'stdout', n, binary)).expect(200);
    expect(res.body).toEqual({ stream: 'stdout', accepted_length: n + 4, stored_bytes: 4 });
    await post(s.id, chunk(worker, 'stderr', 0, 'oops\n')).expect(200);
    // Base64 of text reads back as text.
    await post(s.id, chunk(worker, 'stderr', 5, Buffer.from('again\n'))).expect(200);

    const log = await readLog(t, owner, path);
    expect(log.stdout.equals(Buffer.concat([Buffer.from(unicode), binary]))).toBe(true);
    expect(log.stderr.toString()).toBe('oops\nagain\n');
    expect(log.items.map((i) => [i.stream, i.offset, i.encoding])).toEqual([
      ['stdout', 0, 'utf8'],
      ['stdout', n, 'base64'],
      ['stderr', 0, 'utf8'],
      ['stderr', 5, 'utf8'],
    ]);
    expect(log.items[0].data).toBe(unicode);
    expect(new Date(log.items[0].at).getTime()).toBeLessThanOrEqual(Date.now());
  });

  it('a resend of an accepted chunk is acknowledged and stored once; a longer one stores only the rest', async () => {
    const { worker, s, path } = await started();
    const first = await post(s.id, chunk(worker, 'stdout', 0, 'line 1\n')).expect(200);
    const again = await post(s.id, chunk(worker, 'stdout', 0, 'line 1\n')).expect(200);
    expect(first.body).toEqual({ stream: 'stdout', accepted_length: 7, stored_bytes: 7 });
    expect(again.body).toEqual({ stream: 'stdout', accepted_length: 7, stored_bytes: 0 });
    // A tail of it, then a resend that overlaps and goes on.
    expect((await post(s.id, chunk(worker, 'stdout', 3, 'e 1\n')).expect(200)).body.stored_bytes).toBe(0);
    const longer = await post(s.id, chunk(worker, 'stdout', 0, 'line 1\nline 2\n')).expect(200);
    expect(longer.body).toEqual({ stream: 'stdout', accepted_length: 14, stored_bytes: 7 });
    expect(await storedRows(s.id)).toBe(2);
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('line 1\nline 2\n');
  });

  it('concurrent resends of one chunk store it once', async () => {
    const { worker, s, path } = await started();
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => post(s.id, chunk(worker, 'stderr', 0, 'same bytes\n'))),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(answers.map((a) => a.body.stored_bytes).sort()).toEqual([0, 0, 0, 0, 0, 0, 0, 11]);
    expect(await storedRows(s.id)).toBe(1);
    expect((await readLog(t, owner, path)).stderr.toString()).toBe('same bytes\n');
  });

  it('a gap is a 409 LOG_OFFSET_GAP carrying the accepted length; nothing is stored', async () => {
    const { worker, s, path } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'abc')).expect(200);
    const res = await post(s.id, chunk(worker, 'stdout', 5, 'def')).expect(409);
    expect(res.body.code).toBe('LOG_OFFSET_GAP');
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'offset', accepted_length: 3 })]);
    // Each stream has its own length: stderr has none yet.
    const other = await post(s.id, chunk(worker, 'stderr', 3, 'x')).expect(409);
    expect(other.body.details[0].accepted_length).toBe(0);
    expect(await storedRows(s.id)).toBe(1);
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('abc');
  });

  it('bytes that disagree with stored ones are a 409 LOG_DATA_MISMATCH; nothing is stored', async () => {
    const { worker, s, path } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'abcdef')).expect(200);
    const res = await post(s.id, chunk(worker, 'stdout', 2, 'cXefgh')).expect(409);
    expect(res.body.code).toBe('LOG_DATA_MISMATCH');
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'data', accepted_length: 6 })]);
    expect(res.body.message).toContain('byte 3');
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('abcdef');
  });

  it('bad chunks are 400 naming the field, and store nothing', async () => {
    const { worker, s } = await started();
    const ok = chunk(worker, 'stdout', 0, 'x');
    const cases: [Record<string, unknown>, string][] = [
      [{ ...ok, offset: -1 }, 'offset'],
      [{ ...ok, offset: 1.5 }, 'offset'],
      [{ ...ok, offset: '0' }, 'offset'],
      [{ ...ok, offset: 2 ** 31 }, 'offset'],
      [{ ...ok, stream: 'stdin' }, 'stream'],
      [{ ...ok, data: 'a\u0000b' }, 'data'],
      [{ ...ok, data: 42 }, 'data'],
      [{ ...ok, data: '!!!!', encoding: 'base64' }, 'data'],
      [{ ...ok, data: 'QUJD', encoding: 'hex' }, 'encoding'],
      [{ ...ok, data: 'x'.repeat(MiB + 1) }, 'data'],
      [{ ...ok, data: Buffer.alloc(MiB + 1).toString('base64'), encoding: 'base64' }, 'data'],
      [{ ...ok, extra: 1 }, 'extra'],
      [{ stream: 'stdout', offset: 0, data: 'x' }, 'worker_id'],
    ];
    for (const [body, field] of cases) {
      const res = await post(s.id, body);
      expect([res.status, res.body.code]).toEqual([400, 'VALIDATION_FAILED']);
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    // The biggest chunk is taken.
    await post(s.id, chunk(worker, 'stdout', 0, Buffer.alloc(MiB, 7))).expect(200);
    expect(await storedRows(s.id)).toBe(1);
  });

  it('not the holder: another account 404, another worker id 409 STALE_SUBMISSION, unclaimed 404', async () => {
    const { worker, s, path } = await started();
    const other = await t.user('service');
    const byOtherAccount = await post(s.id, chunk(worker, 'stdout', 0, 'x'), other);
    expect([byOtherAccount.status, byOtherAccount.body.code]).toEqual([404, 'NOT_FOUND']);
    const byOtherWorker = await post(s.id, { ...chunk(worker, 'stdout', 0, 'x'), worker_id: 'not-the-holder' });
    expect([byOtherWorker.status, byOtherWorker.body.code]).toEqual([409, 'STALE_SUBMISSION']);
    const queued = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    const queuedId = queued.jobs[0].job_submissions[0].id;
    const unclaimed = await post(queuedId, chunk(worker, 'stdout', 0, 'x'));
    expect(unclaimed.status).toBe(404);
    await post('00000000-0000-4000-8000-000000000000', chunk(worker, 'stdout', 0, 'x')).expect(404);
    await post('not-a-uuid', chunk(worker, 'stdout', 0, 'x')).expect(404);
    // A user's token may not write.
    expect((await post(s.id, chunk(worker, 'stdout', 0, 'x'), owner)).status).toBe(403);
    expect(await storedRows(s.id)).toBe(0);
    expect(await storedRows(queuedId)).toBe(0);
    expect((await readLog(t, owner, path)).items).toEqual([]);
  });

  it('a finished submission takes chunks for the grace period, then refuses them (409 STALE_SUBMISSION)', async () => {
    const { worker, s, path } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'before exit\n')).expect(200);
    expect((await worker.complete(s.id, DONE)).status).toBe(200);
    await post(s.id, chunk(worker, 'stdout', 12, 'printed just before exit\n')).expect(200);
    await t.dataSource.query(
      `UPDATE job_submissions SET finished_at = finished_at - interval '61 seconds' WHERE id = $1`,
      [s.id],
    );
    const late = await post(s.id, chunk(worker, 'stdout', 37, 'too late\n'));
    expect([late.status, late.body.code]).toEqual([409, 'STALE_SUBMISSION']);
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('before exit\nprinted just before exit\n');
  });

  it('pages by cursor: both streams as written, one in byte order; next_cursor null once finished', async () => {
    const { worker, s, path } = await started();
    const written: [string, string][] = [];
    const offsets = { stdout: 0, stderr: 0 };
    for (let i = 0; i < 25; i++) {
      const stream = i % 3 === 0 ? 'stderr' : 'stdout';
      const line = `${stream} line ${i}\n`;
      await post(s.id, chunk(worker, stream, offsets[stream], line)).expect(200);
      offsets[stream] += line.length;
      written.push([stream, line]);
    }
    const pageOf = async (query: Record<string, string | number>) =>
      (await t.http.get(path).query(query).set(owner.auth).expect(200)).body;
    // Both streams, 10 a page.
    const seen: LogItem[] = [];
    let cursor = '';
    for (let page = 0; page < 3; page++) {
      const body = await pageOf({ limit: 10, ...(cursor ? { cursor } : {}) });
      expect(body.items.length).toBe(page < 2 ? 10 : 5);
      seen.push(...body.items);
      cursor = body.next_cursor;
      expect(cursor).toEqual(expect.any(String)); // running: there may be more later
    }
    expect(seen.map((i) => [i.stream, bytesOf(i).toString()])).toEqual(written);
    expect((await pageOf({ cursor })).items).toEqual([]);
    // A chunk written later is found from the last cursor.
    await post(s.id, chunk(worker, 'stdout', offsets.stdout, 'late line\n')).expect(200);
    const later = await pageOf({ cursor });
    expect(later.items.map((i: LogItem) => i.data)).toEqual(['late line\n']);
    // One stream, in byte order, 4 a page.
    const stderr: LogItem[] = [];
    cursor = '';
    for (;;) {
      const body = await pageOf({ stream: 'stderr', limit: 4, ...(cursor ? { cursor } : {}) });
      stderr.push(...body.items);
      if (body.items.length === 0) break;
      cursor = body.next_cursor;
    }
    expect(stderr.map((i) => i.data)).toEqual(written.filter(([st]) => st === 'stderr').map(([, l]) => l));
    // Finished: the last page says so.
    expect((await worker.complete(s.id, DONE)).status).toBe(200);
    const last = await pageOf({ cursor: later.next_cursor });
    expect(last).toEqual({ items: [], next_cursor: null });
    const whole = await pageOf({ limit: 100 });
    expect([whole.items.length, whole.next_cursor]).toEqual([26, null]);
    // Bad cursors and parameters.
    for (const query of [{ cursor: 'garbage' }, { cursor: Buffer.from('["a",1]').toString('base64url') }]) {
      const res = await t.http.get(path).query(query).set(owner.auth).expect(400);
      expect(res.body.code).toBe('INVALID_CURSOR');
    }
    for (const query of [{ limit: 101 }, { stream: 'stdin' }, { submission_num: -1 }, { follow: 'yes' }, { x: 1 }])
      await t.http.get(path).query(query).set(owner.auth).expect(400);
  });

  it('a page stops adding chunks past 4 MiB of data', async () => {
    const { worker, s, path } = await started();
    for (let i = 0; i < 5; i++)
      await post(s.id, chunk(worker, 'stdout', i * MiB, Buffer.alloc(MiB, 65 + i).toString())).expect(200);
    const first = (await t.http.get(path).query({ limit: 100 }).set(owner.auth).expect(200)).body;
    expect(first.items.map((i: LogItem) => i.offset)).toEqual([0, 1, 2, 3].map((k) => k * MiB));
    const second = (await t.http.get(path).query({ cursor: first.next_cursor }).set(owner.auth).expect(200)).body;
    expect(second.items.map((i: LogItem) => i.offset)).toEqual([4 * MiB]);
    const log = await readLog(t, owner, path, { stream: 'stdout' });
    expect(log.stdout.length).toBe(5 * MiB);
  });

  it("each attempt's logs are kept apart (submission_num), the latest by default", async () => {
    const run = await makeRun(t, owner, project, {
      priority: 1000,
      retry: { on_events: ['error'], max_attempts: 2 },
      jobs: [{ spec: jobSpec() }],
    });
    const worker = makeWorker(t, service, uniqueName('w'));
    const [s0] = await claimFor(worker, run.id);
    await worker.running(s0.id);
    await post(s0.id, chunk(worker, 'stdout', 0, 'attempt 0\n')).expect(200);
    expect((await worker.complete(s0.id, ERROR)).body.retry_submission).toMatchObject({ submission_num: 1 });
    const [s1] = await claimFor(worker, run.id);
    expect(s1.submission_num).toBe(1);
    await worker.running(s1.id);
    await post(s1.id, chunk(worker, 'stdout', 0, 'attempt 1\n')).expect(200);
    const path = logsPath(run);
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('attempt 1\n');
    expect((await readLog(t, owner, path, { submission_num: 1 })).stdout.toString()).toBe('attempt 1\n');
    expect((await readLog(t, owner, path, { submission_num: 0 })).stdout.toString()).toBe('attempt 0\n');
    const missing = await t.http.get(path).query({ submission_num: 7 }).set(owner.auth).expect(404);
    expect(missing.body.message).toContain('submission 7');
  });

  it("only the run's readers see its logs: a non-member 403, another project's path and unknown ids 404", async () => {
    const { run, worker, s, path } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'secret\n')).expect(200);
    const outsider = await t.user();
    await t.http.get(path).set(outsider.auth).expect(403);
    const elsewhere = (await makeProject(t, outsider)).name;
    await t.http
      .get(path.replace(`/projects/${project}/`, `/projects/${elsewhere}/`))
      .set(outsider.auth)
      .expect(404);
    await t.http.get(path).set(service.auth).expect(403);
    await t.http.get(path).expect(401);
    await t.http.get(logsPath(run, '00000000-0000-4000-8000-000000000000')).set(owner.auth).expect(404);
    await t.http.get(logsPath(run, 'nope')).set(owner.auth).expect(404);
    const otherRun = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }] });
    // A job of another run, under this run's path.
    await t.http.get(logsPath(run, otherRun.jobs[0].id)).set(owner.auth).expect(404);
  });

  it('deleting a run deletes its logs (in the same transaction); its worker can add none after', async () => {
    const { run, worker, s, path } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'out\n')).expect(200);
    await post(s.id, chunk(worker, 'stderr', 0, 'err\n')).expect(200);
    const keep = await started();
    await post(keep.s.id, chunk(keep.worker, 'stdout', 0, 'kept\n')).expect(200);
    expect((await worker.complete(s.id, DONE)).status).toBe(200);
    const count = async (runId: string) =>
      (
        await t.dataSource.query(
          `SELECT (SELECT count(*) FROM log_chunks WHERE run_id = $1)::int AS chunks,
                  (SELECT count(*) FROM submission_logs WHERE run_id = $1)::int AS submissions`,
          [runId],
        )
      )[0];
    expect(await count(run.id)).toEqual({ chunks: 2, submissions: 1 });
    await t.http.delete(`/api/v1/projects/${project}/runs/${run.id}`).set(owner.auth).expect(204);
    expect(await count(run.id)).toEqual({ chunks: 0, submissions: 0 });
    await t.http.get(path).set(owner.auth).expect(404);
    // Within the grace period, but the run is gone.
    expect((await post(s.id, chunk(worker, 'stdout', 4, 'more\n'))).status).toBe(404);
    expect(await count(run.id)).toEqual({ chunks: 0, submissions: 0 });
    // Other runs keep theirs.
    expect((await readLog(t, owner, keep.path)).stdout.toString()).toBe('kept\n');
  });

  it("the invariants report checks that each stream's chunks tile it (invariant 10)", async () => {
    const admin = await t.user('admin');
    const { worker, s } = await started();
    await post(s.id, chunk(worker, 'stdout', 0, 'abc')).expect(200);
    await post(s.id, chunk(worker, 'stdout', 3, 'def')).expect(200);
    await post(s.id, chunk(worker, 'stderr', 0, 'err')).expect(200);
    const about = async () =>
      (await invariants(t, admin)).mismatches.filter((m) => JSON.stringify(m).includes(s.id)) as {
        invariant: string;
        detail: string;
      }[];
    expect(await about()).toEqual([]);
    // A lost chunk (done behind the API's back) shows as a gap and as recorded bytes the chunks don't hold.
    await t.dataSource.query(
      `DELETE FROM log_chunks WHERE submission_id = $1 AND stream = 'stdout' AND byte_offset = 0`,
      [s.id],
    );
    try {
      // The check's statement is a UNION ALL without an order: the two may come either way round.
      const found = (await about()).sort((a, b) => (a.detail < b.detail ? -1 : a.detail > b.detail ? 1 : 0));
      expect(found.map((m) => m.invariant)).toEqual(['log_chunks', 'log_chunks']);
      expect(found.map((m) => m.detail)).toEqual([
        expect.stringContaining('stdout: a chunk at byte 3, where 0 was expected'),
        expect.stringContaining('recorded 6/3 bytes (stdout/stderr) in 3 chunks, stored 3/3 in 2'),
      ]);
    } finally {
      await t.dataSource.query(`DELETE FROM log_chunks WHERE submission_id = $1`, [s.id]);
      await t.dataSource.query(`DELETE FROM submission_logs WHERE submission_id = $1`, [s.id]);
    }
    await worker.complete(s.id, DONE);
  });

  describe('following (Server-Sent Events)', () => {
    const follow = (path: string, headers: Record<string, string> = {}, onEvent?: (e: SseEvent) => void) =>
      followSse(baseUrl, path, { Authorization: `Bearer ${owner.token}`, ...headers }, onEvent);

    const waitFor = async (what: () => boolean, ms = 10_000) => {
      const until = Date.now() + ms;
      while (!what()) {
        if (Date.now() > until) throw new Error('timed out');
        await new Promise((r) => setTimeout(r, 10));
      }
    };

    it('sends what is stored, then new chunks in order as they come; ends once the submission finishes', async () => {
      const { worker, s, path } = await started();
      await post(s.id, chunk(worker, 'stdout', 0, 'early\n')).expect(200);
      const f = follow(path);
      await waitFor(() => f.events.length === 1);
      let offset = 6;
      for (let i = 0; i < 20; i++) {
        const line = `line ${i}\n`;
        await post(s.id, chunk(worker, 'stdout', offset, line)).expect(200);
        offset += line.length;
      }
      await post(s.id, chunk(worker, 'stderr', 0, Buffer.from([0, 1, 2]))).expect(200);
      await waitFor(() => f.events.length === 22);
      expect((await worker.complete(s.id, DONE)).status).toBe(200);
      const { status, contentType } = await f.done;
      expect([status, contentType]).toEqual([200, 'text/event-stream; charset=utf-8']);
      const chunks = f.events.filter((e) => e.event === 'chunk').map((e) => JSON.parse(e.data) as LogItem);
      expect(
        chunks
          .filter((c) => c.stream === 'stdout')
          .map((c) => bytesOf(c).toString())
          .join(''),
      ).toBe(`early\n${Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join('')}`);
      expect(bytesOf(chunks[chunks.length - 1])).toEqual(Buffer.from([0, 1, 2]));
      expect(f.events.every((e) => e.event !== 'chunk' || e.id)).toBe(true);
      const end = f.events[f.events.length - 1];
      expect(end.event).toBe('end');
      expect(JSON.parse(end.data)).toEqual({
        kind: 'end',
        submission_num: 0,
        status: 'done',
        termination_reason: 'done_by_runner',
      });
    });

    it('resumes after Last-Event-ID; follow=true without the Accept header; one stream at a time', async () => {
      const { worker, s, path } = await started();
      for (let i = 0; i < 5; i++) await post(s.id, chunk(worker, 'stdout', i * 2, `${i}\n`)).expect(200);
      await post(s.id, chunk(worker, 'stderr', 0, 'e\n')).expect(200);
      expect((await worker.complete(s.id, DONE)).status).toBe(200);
      const all = follow(path);
      await all.done;
      const ids = all.events.flatMap((e) => (e.event === 'chunk' && e.id ? [e.id] : []));
      expect(ids.length).toBe(6);
      const resumed = follow(path, { 'Last-Event-ID': ids[2] });
      await resumed.done;
      expect(resumed.events.map((e) => (e.event === 'chunk' ? JSON.parse(e.data).data : e.event))).toEqual([
        '3\n',
        '4\n',
        'e\n',
        'end',
      ]);
      const byQuery = followSse(baseUrl, `${path}?follow=true&stream=stderr`, {
        Authorization: `Bearer ${owner.token}`,
        Accept: '*/*',
      });
      await byQuery.done;
      expect(byQuery.events.map((e) => e.event)).toEqual(['chunk', 'end']);
      // follow=false answers a page even to Accept: text/event-stream.
      const page = await t.http.get(path).query({ follow: 'false' }).set('Accept', 'text/event-stream').set(owner.auth);
      expect([page.status, page.body.items.length]).toEqual([200, 6]);
      // Errors before the stream starts are the usual JSON errors.
      const bad = follow(path, { 'Last-Event-ID': 'garbage' });
      const answer = await bad.done;
      expect([answer.status, JSON.parse(answer.body).code]).toEqual([400, 'INVALID_CURSOR']);
    });

    it('stops when the client goes away, and the app closes with followers open', async () => {
      const { worker, s, path } = await started();
      const gone = follow(path);
      await post(s.id, chunk(worker, 'stdout', 0, 'x\n')).expect(200);
      await waitFor(() => gone.events.length === 1);
      gone.close();
      await gone.done.catch(() => undefined);
      // Still writable and readable afterwards.
      await post(s.id, chunk(worker, 'stdout', 2, 'y\n')).expect(200);
      expect((await readLog(t, owner, path)).stdout.toString()).toBe('x\ny\n');
      // A second app on the same database: its open follower ends when it closes.
      const other = await createTestApp();
      await other.app.listen(0, '127.0.0.1');
      const port = ((other.app.getHttpServer() as Server).address() as AddressInfo).port;
      const open = followSse(`http://127.0.0.1:${port}`, path, { Authorization: `Bearer ${owner.token}` });
      await waitFor(() => open.events.length === 2);
      await other.close();
      await open.done.catch(() => undefined);
      expect(open.events.length).toBe(2);
      await worker.complete(s.id, DONE);
    });

    // On the embedded database there is one process: nothing to notify across (followers are woken in-process).
    (embeddedOnly ? it.skip : it)(
      'a follower on one instance is woken by a chunk written through another (NOTIFY)',
      async () => {
        const { worker, s, path } = await started();
        const other = await createTestApp();
        try {
          const f = follow(path);
          // Well into its sleep (the re-read comes a second after its first read): only a notification wakes it soon.
          await new Promise((r) => setTimeout(r, 300));
          const listeners = await t.dataSource.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE application_name = 'runplane-logs-listen' AND datname = current_database()`,
          );
          expect(listeners[0].n).toBeGreaterThanOrEqual(1);
          const started = Date.now();
          await other.http
            .post(`/internal/v1/submissions/${s.id}/logs`)
            .set(service.auth)
            .send(chunk(worker, 'stdout', 0, 'from elsewhere\n'))
            .expect(200);
          await waitFor(() => f.events.length === 1);
          expect(Date.now() - started).toBeLessThan(500);
          expect(JSON.parse(f.events[0].data).data).toBe('from elsewhere\n');
          await worker.complete(s.id, DONE);
          await f.done;
          expect(f.events.map((e) => e.event)).toEqual(['chunk', 'end']);
        } finally {
          await other.close();
        }
      },
    );
  });
});

describe('logs: the per-submission quota', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({ RUNPLANE_LOG_QUOTA_BYTES: '100' });
    owner = await t.user();
    service = await t.user('service');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  it('past the quota (both streams together) a chunk is refused whole: 413 LOG_QUOTA_EXCEEDED', async () => {
    const run = await makeRun(t, owner, project, { priority: 1000, jobs: [{ spec: jobSpec() }] });
    const worker = makeWorker(t, service, uniqueName('w'));
    const [s] = await claimFor(worker, run.id);
    await worker.running(s.id);
    const send = (stream: string, offset: number, data: string) =>
      t.http
        .post(`/internal/v1/submissions/${s.id}/logs`)
        .set(service.auth)
        .send({ worker_id: worker.workerId, stream, offset, data });
    await send('stdout', 0, 'o'.repeat(60)).expect(200);
    await send('stderr', 0, 'e'.repeat(40)).expect(200); // exactly the quota
    const over = await send('stdout', 60, 'o');
    expect([over.status, over.body.code]).toEqual([413, 'LOG_QUOTA_EXCEEDED']);
    expect(over.body.details).toEqual([
      expect.objectContaining({ field: 'data', accepted_length: 60, quota_bytes: 100, used_bytes: 100 }),
    ]);
    // Repeats of stored bytes are still acknowledged.
    expect((await send('stdout', 0, 'o'.repeat(60)).expect(200)).body.stored_bytes).toBe(0);
    const done = await worker.complete(s.id, {
      status: 'failed',
      termination_reason: 'log_quota_exceeded',
      exit_status: 137,
    });
    expect(done.status).toBe(200);
    const path = `/api/v1/projects/${project}/runs/${run.id}/jobs/${run.jobs[0].id}/logs`;
    const log = await readLog(t, owner, path);
    expect([log.stdout.length, log.stderr.length]).toEqual([60, 40]);
    const view = (await t.http.get(`/api/v1/projects/${project}/runs/${run.id}`).set(owner.auth).expect(200)).body;
    expect(view.jobs[0]).toMatchObject({ status: 'failed', termination_reason: 'log_quota_exceeded' });
  });
});
