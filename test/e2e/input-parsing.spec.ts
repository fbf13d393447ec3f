import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import type { Server } from 'node:http';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { expectFieldError, rowCounts } from '../support/input-errors';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';

/**
 * Issue #17, "loose parsing": numbers judged on their value against the column that stores them, strict integers
 * in paths and queries, real calendar dates, bodies refused where a route takes none, and every refusal, the HTTP
 * parser's included (431), in the error shape naming its field.
 */
describe('input parsing: numbers, integers, dates, bodyless routes, HTTP framing', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  let runId: string;
  let runs: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
    runs = `/api/v1/projects/${project}/runs`;
    runId = (await makeRun(t, owner, project)).id;
  });
  afterAll(() => t.close());

  const postRaw = (path: string, json: string, user = owner) =>
    t.http.post(path).set(user.auth).set('Content-Type', 'application/json').send(json);

  describe('arrays of objects', () => {
    it('an array where an entry object is expected is 400 naming the list, never a 500; nothing written', async () => {
      const before = await rowCounts(t);
      const spec = jobSpec();
      for (const [path, body, field] of [
        [runs, { jobs: [[]] }, 'jobs'],
        [runs, { jobs: [{ spec }, [{ spec }]] }, 'jobs'],
        [runs, { job_groups: [[]], jobs: [{ spec }] }, 'job_groups'],
        [`${runs}/${runId}/job-groups/0/jobs`, { jobs: [[]] }, 'jobs'],
      ] as const) {
        expectFieldError(await t.http.post(path).set(owner.auth).send(body), 400, 'VALIDATION_FAILED', field);
      }
      expectFieldError(
        await t.http
          .put(`/api/v1/projects/${project}/members`)
          .set(owner.auth)
          .send({ members: [[]] }),
        400,
        'VALIDATION_FAILED',
        'members',
      );
      expect(await rowCounts(t)).toEqual(before);
    });
  });

  describe('numbers on their value, within what their column stores', () => {
    it('billing_limit_usd (numeric(18,6)): under 1e-6, off the grid or too big is 400; nothing created', async () => {
      const before = await rowCounts(t);
      for (const text of ['1e-7', '1.5e-7', '0.0000001', '0.1234567', '1e12', '1e308', '-1', '1e400']) {
        const res = await postRaw('/api/v1/projects', `{"name":"${uniqueName('num')}","billing_limit_usd":${text}}`);
        expectFieldError(res, 400, 'VALIDATION_FAILED', 'billing_limit_usd');
      }
      expect(await rowCounts(t)).toEqual(before);
      const project1 = (await makeProject(t, owner)).name;
      for (const text of ['1e-7', '1.5e-7', '1e13']) {
        const res = await t.http
          .patch(`/api/v1/projects/${project1}`)
          .set(owner.auth)
          .set('Content-Type', 'application/json')
          .send(`{"billing_limit_usd":${text}}`);
        expectFieldError(res, 400, 'VALIDATION_FAILED', 'billing_limit_usd');
      }
    });

    it('values the column holds exactly are stored exactly, whatever their printed form', async () => {
      for (const [text, value] of [
        ['1e-6', 0.000001],
        ['1.5e-5', 0.000015],
        ['999999999999', 999_999_999_999],
        ['0.1', 0.1],
        ['2.50', 2.5],
        ['0', 0],
      ] as const) {
        const res = await postRaw(
          '/api/v1/projects',
          `{"name":"${uniqueName('num')}","billing_limit_usd":${text}}`,
        ).expect(201);
        expect(res.body.billing_limit_usd).toBe(value);
        const [row] = await t.dataSource.query('SELECT billing_limit_usd::text AS v FROM projects WHERE id = $1', [
          res.body.id,
        ]);
        expect(Number(row.v)).toBe(value);
      }
    });

    it('cpu (numeric(10,3)): 1e-7 and non-multiples of 0.001 are 400 naming the field; 1e-3 is accepted', async () => {
      const before = await rowCounts(t);
      for (const cpu of ['1e-7', '1.5e-7', '0.0015', '1e308', '1025']) {
        const body = `{"jobs":[{"spec":{"commands":["x"],"resources":{"cpu":${cpu},"memory_mib":1}}}]}`;
        expectFieldError(await postRaw(runs, body), 400, 'VALIDATION_FAILED', 'jobs[0].spec.resources.cpu');
        expectFieldError(
          await postRaw(`${runs}/${runId}/job-groups/0/jobs`, body),
          400,
          'VALIDATION_FAILED',
          'jobs[0].spec.resources.cpu',
        );
      }
      expect(await rowCounts(t)).toEqual(before);
      await postRaw(runs, '{"jobs":[{"spec":{"commands":["x"],"resources":{"cpu":1e-3,"memory_mib":1}}}]}').expect(201);
    });

    it('rate_usd_per_unit_hour (numeric(20,10)): 1e-11 and Infinity are 400; 1e-10 is accepted', async () => {
      const admin = await t.user('admin');
      const name = `r${Date.now().toString(36)}`;
      // Only a resource some requestable key maps to takes a rate: map one, as a migration would.
      await t.dataSource.query(
        `INSERT INTO requestable_resources (spec_key, resource_name, unit, factor, scale, max_quantity)
         VALUES ($1, $1, 'unit', 1, 0, 1)`,
        [name],
      );
      for (const text of ['1e-11', '1.5e-11', '1e400', '1e10']) {
        const res = await postRaw(
          '/admin/v1/resources',
          `{"name":"${name}","unit":"unit","rate_usd_per_unit_hour":${text}}`,
          admin,
        );
        expectFieldError(res, 400, 'VALIDATION_FAILED', 'rate_usd_per_unit_hour');
      }
      const ok = await postRaw(
        '/admin/v1/resources',
        `{"name":"${name}","unit":"unit","rate_usd_per_unit_hour":1e-10}`,
        admin,
      ).expect(201);
      expect(ok.body.rate_usd_per_unit_hour).toBe(1e-10);
    });
  });

  describe('integers in canonical decimal only', () => {
    const NOT_CANONICAL = ['0x1', '01', '%201', '1%20', '1e3', '+1', '-0', '1.0', '-1', '2147483648', '99999999999'];

    it('group ids in paths: 400 naming g on every route that takes one; nothing cancelled', async () => {
      const before = await rowCounts(t);
      for (const g of NOT_CANONICAL) {
        const base = `${runs}/${runId}/job-groups/${g}`;
        expectFieldError(await t.http.get(base).set(owner.auth), 400, 'VALIDATION_FAILED', 'g');
        expectFieldError(await t.http.get(`${base}/cost`).set(owner.auth), 400, 'VALIDATION_FAILED', 'g');
        expectFieldError(await t.http.get(`${base}/jobs`).set(owner.auth), 400, 'VALIDATION_FAILED', 'g');
        expectFieldError(await t.http.post(`${base}/cancel`).set(owner.auth).send({}), 400, 'VALIDATION_FAILED', 'g');
        expectFieldError(
          await t.http
            .post(`${base}/jobs`)
            .set(owner.auth)
            .send({ jobs: [{ spec: jobSpec() }] }),
          400,
          'VALIDATION_FAILED',
          'g',
        );
      }
      expect(await rowCounts(t)).toEqual(before);
      await t.http.get(`${runs}/${runId}/job-groups/0`).set(owner.auth).expect(200);
    });

    it('integer query parameters: 400 naming the parameter', async () => {
      const lists = [
        '/api/v1/projects',
        runs,
        '/api/v1/runs',
        `${runs}/${runId}/job-groups/0/job-groups`,
        `${runs}/${runId}/job-groups/0/jobs`,
      ];
      for (const value of ['1e1', '01', '%205', '5%20', '0x5', '5.0', '+5', '1,2']) {
        for (const list of lists)
          expectFieldError(
            await t.http.get(`${list}?limit=${value}`).set(owner.auth),
            400,
            'VALIDATION_FAILED',
            'limit',
          );
        expectFieldError(
          await t.http.get(`${runs}?job_submissions_limit=${value}`).set(owner.auth),
          400,
          'VALIDATION_FAILED',
          'job_submissions_limit',
        );
        expectFieldError(
          await t.http.get(`${runs}/${runId}?job_submissions_limit=${value}`).set(owner.auth),
          400,
          'VALIDATION_FAILED',
          'job_submissions_limit',
        );
      }
      const page = await t.http.get(`${runs}?limit=5&job_submissions_limit=0`).set(owner.auth).expect(200);
      expect(page.body.items.length).toBeGreaterThan(0);
    });

    it('forged cursors whose keys no column holds are INVALID_CURSOR naming cursor', async () => {
      const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
      for (const [path, keys] of [
        [`${runs}/${runId}/job-groups/0/job-groups`, [1e300]],
        [`${runs}/${runId}/job-groups/0/job-groups`, [1.5]],
        [`${runs}/${runId}/job-groups/0/jobs`, [0, 2 ** 31]],
        ['/api/v1/projects', ['a\u0000']],
        ['/api/v1/projects', ['\ud800']],
        ['/api/v1/projects', ['x'.repeat(300)]],
      ] as const) {
        expectFieldError(
          await t.http
            .get(path)
            .query({ cursor: b64(keys) })
            .set(owner.auth),
          400,
          'INVALID_CURSOR',
          'cursor',
        );
      }
      const job = (await t.http.get(`${runs}/${runId}`).set(owner.auth).expect(200)).body.jobs[0].id as string;
      const sub = `${runs}/${runId}/jobs/${job}/submissions`;
      expectFieldError(
        await t.http
          .get(sub)
          .query({ cursor: b64([-1e20]) })
          .set(owner.auth),
        400,
        'INVALID_CURSOR',
        'cursor',
      );
      await t.http.get(sub).set(owner.auth).expect(200);
      // A malformed job id names no job: 404, not a uuid-cast 400 naming nothing.
      const notJob = await t.http.get(`${runs}/${runId}/jobs/abc/submissions`).set(owner.auth).expect(404);
      expect(notJob.body.code).toBe('NOT_FOUND');
    });
  });

  describe('billing report dates', () => {
    it('impossible calendar days are 400 naming from or to', async () => {
      const billing = `/api/v1/projects/${project}/billing`;
      for (const [from, to, field] of [
        ['2024-02-30', '2024-03-01', 'from'],
        ['2023-02-29', '2023-03-01', 'from'],
        ['2024-01-01', '2024-13-01', 'to'],
        ['2024-01-01', '2024-04-31', 'to'],
        ['0000-01-01', '2024-01-01', 'from'],
        ['2024-1-01', '2024-01-02', 'from'],
      ]) {
        expectFieldError(
          await t.http.get(billing).query({ from, to }).set(owner.auth),
          400,
          'VALIDATION_FAILED',
          field,
        );
      }
      await t.http.get(billing).query({ from: '2024-02-29', to: '2024-03-01' }).set(owner.auth).expect(200);
    });
  });

  describe('routes that take no body refuse one', () => {
    it('POST /users/me/tokens: JSON fields named, else body; no token minted; {} and nothing accepted', async () => {
      const tokens = async () =>
        (await t.dataSource.query('SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1', [owner.id]))[0]
          .n as number;
      const before = await tokens();
      const res = await t.http.post('/api/v1/users/me/tokens').set(owner.auth).send({ name: 'x', ttl: 5 });
      expectFieldError(res, 400, 'VALIDATION_FAILED', 'name');
      expect(res.body.details).toEqual([
        { field: 'name', message: 'should not exist' },
        { field: 'ttl', message: 'should not exist' },
      ]);
      expectFieldError(await postRaw('/api/v1/users/me/tokens', '[1]'), 400, 'VALIDATION_FAILED', 'body');
      expectFieldError(await postRaw('/api/v1/users/me/tokens', '"x"'), 400, 'VALIDATION_FAILED', 'body');
      expectFieldError(
        await t.http.post('/api/v1/users/me/tokens').set(owner.auth).set('Content-Type', 'text/plain').send('hello'),
        400,
        'VALIDATION_FAILED',
        'body',
      );
      expectFieldError(
        await postRaw('/api/v1/users/me/tokens', '{"__proto__":{}}'),
        400,
        'VALIDATION_FAILED',
        '__proto__',
      );
      expect(await tokens()).toBe(before);
      await t.http.post('/api/v1/users/me/tokens').set(owner.auth).expect(201);
      await postRaw('/api/v1/users/me/tokens', '{}').expect(201);
      expect(await tokens()).toBe(before + 2);
    });

    it('admin cleanup, DELETE of a run, and GETs', async () => {
      const admin = await t.user('admin');
      expectFieldError(
        await t.http.post('/admin/v1/maintenance/cleanup').set(admin.auth).send({ dry_run: true }),
        400,
        'VALIDATION_FAILED',
        'dry_run',
      );
      await t.http.post('/admin/v1/maintenance/cleanup').set(admin.auth).expect(200);
      expectFieldError(
        await t.http.delete(`${runs}/${runId}`).set(owner.auth).send({ force: true }),
        400,
        'VALIDATION_FAILED',
        'force',
      );
      const [row] = await t.dataSource.query('SELECT deleted FROM runs WHERE id = $1', [runId]);
      expect(row.deleted).toBe(false);
      // A GET's body is never read: it is refused by its framing, naming `body`.
      expectFieldError(
        await t.http.get(`/api/v1/projects/${project}`).set(owner.auth).send({ x: 1 }),
        400,
        'VALIDATION_FAILED',
        'body',
      );
    });

    it('routes that take a body still take it (stop, cancel with and without one)', async () => {
      const run = await makeRun(t, owner, project);
      expectFieldError(
        await t.http.post(`${runs}/${run.id}/stop`).set(owner.auth).send({ abort: false, force: 1 }),
        400,
        'VALIDATION_FAILED',
        'force',
      );
      await t.http.post(`${runs}/${run.id}/job-groups/0/cancel`).set(owner.auth).send({ reason: 'enough' }).expect(200);
      await t.http.post(`${runs}/${run.id}/stop`).set(owner.auth).expect(200);
    });
  });

  describe('the HTTP parser refuses with the error shape', () => {
    let server: Server;
    let port: number;
    beforeAll(async () => {
      server = t.app.getHttpServer() as Server;
      if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
    });

    /** Sends raw bytes; resolves with the response once its body is complete (or the connection closed). */
    const rawExchange = (bytes: string) =>
      new Promise<string>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
        let got = '';
        const done = () => {
          socket.destroy();
          resolve(got);
        };
        socket.on('data', (d) => {
          got += d.toString('utf8');
          const end = got.indexOf('\r\n\r\n');
          const length = /content-length: (\d+)/i.exec(got.slice(0, end));
          if (end >= 0 && length && Buffer.byteLength(got.slice(end + 4)) >= Number(length[1])) done();
        });
        socket.on('error', done);
        socket.on('close', done);
        socket.setTimeout(10_000, done);
      });
    const parse = (raw: string) => {
      const [head, body] = raw.split('\r\n\r\n');
      return { status: Number(head.split(' ')[1]), head, body: JSON.parse(body) as { details: { field: string }[] } };
    };

    it('a 100 KB cursor: 431 naming cursor, with a JSON body (it was empty)', async () => {
      const res = await t.http.get(`${runs}?cursor=${'a'.repeat(100_000)}`).set(owner.auth);
      expectFieldError(res, 431, 'REQUEST_HEADERS_TOO_LARGE', 'cursor');
      const raw = parse(
        await rawExchange(`GET ${runs}?limit=5&cursor=${'a'.repeat(100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
      );
      expect(raw.status).toBe(431);
      expect(raw.head).toMatch(/content-type: application\/json/i);
      expect(raw.body).toMatchObject({
        status_code: 431,
        code: 'REQUEST_HEADERS_TOO_LARGE',
        details: [{ field: 'cursor' }],
      });
    });

    it('an oversized header: 431 naming the header', async () => {
      const raw = parse(
        await rawExchange(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ${'p'.repeat(20_000)}\r\n\r\n`),
      );
      expect(raw).toMatchObject({
        status: 431,
        body: { status_code: 431, code: 'REQUEST_HEADERS_TOO_LARGE', details: [{ field: 'x-padding' }] },
      });
    });

    it('a request that is not HTTP, or has a NUL in its URL: 400 with the error shape', async () => {
      for (const bytes of [
        'garbage\r\n\r\n',
        'GET /a\u0000b HTTP/1.1\r\nHost: x\r\n\r\n',
        'GET / HTTP/1.1\r\nBad Header\r\n\r\n',
      ]) {
        const raw = parse(await rawExchange(bytes));
        expect(raw).toMatchObject({
          status: 400,
          body: { status_code: 400, code: 'VALIDATION_FAILED', details: [{ field: 'request' }] },
        });
      }
    });

    it('an over-long but parsable cursor is a 400 naming cursor', async () => {
      expectFieldError(
        await t.http.get(`${runs}?cursor=${'a'.repeat(5_000)}`).set(owner.auth),
        400,
        'VALIDATION_FAILED',
        'cursor',
      );
    });
  });
});
