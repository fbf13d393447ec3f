import { randomUUID } from 'node:crypto';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { expectFieldError, rowCounts } from '../support/input-errors';
import { createTestApp, TestApp, TestUser } from '../support/test-app';

/**
 * Issue #17, "no 500 from input": text PostgreSQL can't store, JSON nested past the limit and prototype-named keys
 * are refused before validation with a 400 naming the field, on every route, and nothing is written.
 */
describe('input guard: unstorable text, depth, prototype-named keys', () => {
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

  /** POSTs raw JSON text (so that `__proto__` keys and lone surrogates arrive exactly as written). */
  const postRaw = (path: string, json: string, user = owner) =>
    t.http.post(path).set(user.auth).set('Content-Type', 'application/json').send(json);
  const spec = (overrides: Record<string, unknown> = {}) => jobSpec(overrides);
  const runBody = (overrides: Record<string, unknown>) => JSON.stringify({ jobs: [{ spec: spec() }], ...overrides });

  describe('NUL (\\u0000) in any text or jsonb value or key → 400 naming the field', () => {
    const NUL = '\u0000';
    const RUN_CASES: [string, string][] = [
      [runBody({ attributes: { a: `x${NUL}y` } }), 'attributes.a'],
      [runBody({ attributes: { nested: { list: ['ok', `bad${NUL}`] } } }), 'attributes.nested.list[1]'],
      [runBody({ attributes: { [`k${NUL}`]: 1 } }), 'attributes["k\\u0000"]'],
      [runBody({ jobs: [{ spec: spec({ commands: ['echo ok', `echo ${NUL}`] }) }] }), 'jobs[0].spec.commands[1]'],
      [runBody({ jobs: [{ spec: spec({ env: { FOO: `a${NUL}b` } }) }] }), 'jobs[0].spec.env.FOO'],
      [runBody({ jobs: [{ spec: spec({ env: { [`F${NUL}`]: 'x' } }) }] }), 'jobs[0].spec.env["F\\u0000"]'],
      [runBody({ jobs: [{ spec: spec({ image: `python${NUL}` }) }] }), 'jobs[0].spec.image'],
      [runBody({ jobs: [{ name: `n${NUL}`, spec: spec() }] }), 'jobs[0].name'],
      [runBody({ run_name: `r${NUL}` }), 'run_name'],
      [runBody({ job_groups: [{ ref: 'g', attributes: { x: NUL } }] }), 'job_groups[0].attributes.x'],
      [runBody({ job_groups: [{ ref: `g${NUL}` }] }), 'job_groups[0].ref'],
    ];
    it.each(RUN_CASES.map(([body, field]) => [field, body]))('run submission: %s', async (field, body) => {
      const before = await rowCounts(t);
      expectFieldError(await postRaw(runs, body), 400, 'VALIDATION_FAILED', field);
      expect(await rowCounts(t)).toEqual(before);
    });

    it('on the other writing routes: groups, jobs, cancel, projects, members, users, rates, reports', async () => {
      const admin = await t.user('admin');
      const service = await t.user('service');
      const groups = `${runs}/${runId}/job-groups`;
      const cases: [string, string, string, TestUser][] = [
        [groups, JSON.stringify({ parent_id: 0, attributes: { a: NUL } }), 'attributes.a', owner],
        [
          `${groups}/0/jobs`,
          JSON.stringify({ jobs: [{ spec: spec({ env: { FOO: NUL } }) }] }),
          'jobs[0].spec.env.FOO',
          owner,
        ],
        [`${groups}/0/cancel`, JSON.stringify({ reason: `because${NUL}` }), 'reason', owner],
        [`${runs}/${runId}/stop`, JSON.stringify({ abort: false, [`x${NUL}`]: 1 }), '["x\\u0000"]', owner],
        ['/api/v1/projects', JSON.stringify({ name: `p${NUL}` }), 'name', owner],
        ['/api/v1/users', JSON.stringify({ name: `u${NUL}`, global_role: 'user' }), 'name', admin],
        [
          '/admin/v1/resources',
          JSON.stringify({ name: 'cpu', rate_usd_per_unit_hour: 1, unit: `c${NUL}` }),
          'unit',
          admin,
        ],
        [
          `/internal/v1/submissions/${randomUUID()}/running`,
          JSON.stringify({ worker_id: 'w1', provisioning_data: { host: NUL } }),
          'provisioning_data.host',
          service,
        ],
        [
          `/internal/v1/submissions/${randomUUID()}/complete`,
          JSON.stringify({ worker_id: `w${NUL}`, status: 'done', termination_reason: 'done_by_runner' }),
          'worker_id',
          service,
        ],
      ];
      for (const [path, body, field, user] of cases) {
        const before = await rowCounts(t);
        expectFieldError(await postRaw(path, body, user), 400, 'VALIDATION_FAILED', field);
        expect(await rowCounts(t)).toEqual(before);
      }
      const res = await t.http
        .put(`/api/v1/projects/${project}/members`)
        .set(owner.auth)
        .send({ members: [{ user: `x${NUL}`, role: 'user' }] });
      expectFieldError(res, 400, 'VALIDATION_FAILED', 'members[0].user');
    });

    it('in query parameters', async () => {
      expectFieldError(await t.http.get(`${runs}?user=a%00`).set(owner.auth), 400, 'VALIDATION_FAILED', 'user');
      expectFieldError(
        await t.http.get(`${runs}/${runId}/job-groups/0/jobs?status=done%00`).set(owner.auth),
        400,
        'VALIDATION_FAILED',
        'status',
      );
      expectFieldError(
        await t.http.get(`/api/v1/projects?cursor=a%00`).set(owner.auth),
        400,
        'VALIDATION_FAILED',
        'cursor',
      );
    });

    it('in a path segment → 404 with the error shape, before any lookup; nothing written', async () => {
      const before = await rowCounts(t);
      for (const path of [
        '/api/v1/projects/x%00y',
        `${runs}/x%00y`,
        `${runs}/${runId}/jobs/a%00/submissions`,
        '/api/v1/projects/%ff',
        '/api/v1/projects/%ed%a0%80',
      ]) {
        expectFieldError(await t.http.get(path).set(owner.auth), 404, 'NOT_FOUND', 'path');
      }
      expectFieldError(await postRaw('/api/v1/projects/x%00y/runs', runBody({})), 404, 'NOT_FOUND', 'path');
      expectFieldError(await postRaw(`${runs}/${runId}%00/stop`, '{}'), 404, 'NOT_FOUND', 'path');
      expect(await rowCounts(t)).toEqual(before);
    });
  });

  describe('lone surrogates and non-finite numbers', () => {
    it('a lone surrogate in a value or a key is a 400 naming the field', async () => {
      const job = '"jobs":[{"spec":{"commands":["x"],"resources":{"cpu":1,"memory_mib":1}}}]';
      const before = await rowCounts(t);
      for (const [json, field] of [
        [`{"attributes":{"a":"\\ud800"},${job}}`, 'attributes.a'],
        [`{"attributes":{"a":"x\\udc00y"},${job}}`, 'attributes.a'],
        [`{"attributes":{"\\udbff":1},${job}}`, 'attributes["\\udbff"]'],
        [`{"run_name":"\\ud83d",${job}}`, 'run_name'],
      ] as const) {
        expectFieldError(await postRaw(runs, json), 400, 'VALIDATION_FAILED', field);
      }
      expect(await rowCounts(t)).toEqual(before);
      // A proper pair (an emoji) is text like any other.
      const ok = await postRaw(runs, `{"attributes":{"a":"\\ud83d\\ude00"},${job}}`).expect(201);
      expect(ok.body.attributes).toEqual({ a: '😀' });
    });

    it('a number JSON parses to Infinity (1e400) is refused, not stored as null', async () => {
      const before = await rowCounts(t);
      const res = await postRaw(
        runs,
        '{"attributes":{"a":1e400},"jobs":[{"spec":{"commands":["x"],"resources":{"cpu":1,"memory_mib":1}}}]}',
      );
      expectFieldError(res, 400, 'VALIDATION_FAILED', 'attributes.a');
      expect(await rowCounts(t)).toEqual(before);
    });
  });

  describe('JSON depth', () => {
    const arrays = (n: number) => '['.repeat(n) + ']'.repeat(n);

    it('3,000 (and 1,000,000) deep is a 400 before validation, in known and unknown fields, on any route', async () => {
      const before = await rowCounts(t);
      for (const depth of [3_000, 1_000_000]) {
        const res = await postRaw(runs, `{"attributes":{"a":${arrays(depth)}},"jobs":[]}`);
        expectFieldError(res, 400, 'VALIDATION_FAILED', `attributes.a${'[0]'.repeat(62)}`);
        expect(res.body.message).toContain('deeper than 64');
      }
      expectFieldError(
        await postRaw(runs, `{"zzz":${arrays(3_000)}}`),
        400,
        'VALIDATION_FAILED',
        `zzz${'[0]'.repeat(63)}`,
      );
      expectFieldError(
        await postRaw('/api/v1/projects', `{"name":${arrays(3_000)}}`),
        400,
        'VALIDATION_FAILED',
        `name${'[0]'.repeat(63)}`,
      );
      expect(await rowCounts(t)).toEqual(before);
    });

    it('64 levels (the body counted) pass; 65 do not', async () => {
      // body (1) → attributes (2) → 62 arrays (3..64).
      const ok = await postRaw(
        runs,
        `{"attributes":{"a":${arrays(62)}},"jobs":[{"spec":${JSON.stringify(spec())}}]}`,
      ).expect(201);
      expect(JSON.stringify(ok.body.attributes)).toBe(`{"a":${arrays(62)}}`);
      const res = await postRaw(runs, `{"attributes":{"a":${arrays(63)}},"jobs":[{"spec":${JSON.stringify(spec())}}]}`);
      expectFieldError(res, 400, 'VALIDATION_FAILED', `attributes.a${'[0]'.repeat(62)}`);
    });
  });

  describe('keys named __proto__, constructor or prototype → 400 like any unknown field, at every level', () => {
    const job = (specExtra = '', jobExtra = '', resourcesExtra = '', envExtra = '') =>
      `{${jobExtra}"spec":{${specExtra}"commands":["x"],"env":{${envExtra}"A":"1"},` +
      `"resources":{${resourcesExtra}"cpu":1,"memory_mib":1}}}`;
    const CASES: [string, string, string][] = [];
    for (const key of ['__proto__', 'constructor', 'prototype']) {
      const value = key === '__proto__' ? '{"polluted":true}' : '1';
      CASES.push(
        ['RUNS', `{"${key}":${value},"jobs":[${job()}]}`, key],
        ['RUNS', `{"attributes":{"${key}":${value}},"jobs":[${job()}]}`, `attributes.${key}`],
        ['RUNS', `{"attributes":{"deep":[{"${key}":${value}}]},"jobs":[${job()}]}`, `attributes.deep[0].${key}`],
        ['RUNS', `{"retry":{"on_events":["error"],"${key}":${value}},"jobs":[${job()}]}`, `retry.${key}`],
        ['RUNS', `{"job_groups":[{"ref":"g","${key}":${value}}],"jobs":[${job()}]}`, `job_groups[0].${key}`],
        [
          'RUNS',
          `{"job_groups":[{"ref":"g","attributes":{"${key}":${value}}}],"jobs":[${job()}]}`,
          `job_groups[0].attributes.${key}`,
        ],
        ['RUNS', `{"jobs":[${job('', `"${key}":${value},`)}]}`, `jobs[0].${key}`],
        ['RUNS', `{"jobs":[${job(`"${key}":${value},`)}]}`, `jobs[0].spec.${key}`],
        ['RUNS', `{"jobs":[${job('', '', `"${key}":${value},`)}]}`, `jobs[0].spec.resources.${key}`],
        ['RUNS', `{"jobs":[${job('', '', '', `"${key}":"x",`)}]}`, `jobs[0].spec.env.${key}`],
        ['/api/v1/projects', `{"name":"proto-ok","${key}":${value}}`, key],
      );
    }
    it.each(CASES.map(([path, json, field]) => [field, path, json]))('%s', async (field, path, json) => {
      const before = await rowCounts(t);
      const res = await postRaw(path === 'RUNS' ? runs : path, json);
      expectFieldError(res, 400, 'VALIDATION_FAILED', field);
      expect(res.body.details).toContainEqual({ field, message: 'should not exist' });
      expect(await rowCounts(t)).toEqual(before);
      expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    });

    it('in a query', async () => {
      for (const key of ['__proto__', 'constructor', 'prototype']) {
        expectFieldError(await t.http.get(`${runs}?${key}=1`).set(owner.auth), 400, 'VALIDATION_FAILED', key);
        expectFieldError(await t.http.get(`/api/v1/projects?${key}=1`).set(owner.auth), 400, 'VALIDATION_FAILED', key);
      }
    });
  });

  describe('a compressed body', () => {
    it('gzip, deflate and br bodies are read inflated; one that does not inflate → 400 naming body', async () => {
      const send = (encoding: string, body: Buffer) =>
        t.http
          .post('/api/v1/projects')
          .set(owner.auth)
          .set('Content-Type', 'application/json')
          .set('Content-Encoding', encoding)
          // As bytes: superagent would otherwise write a Buffer as JSON.
          .serialize((b: Buffer) => b as unknown as string)
          .send(body);
      const json = (name: string) => Buffer.from(JSON.stringify({ name }));
      for (const [encoding, pack] of [
        ['gzip', gzipSync],
        ['deflate', deflateSync],
        ['br', brotliCompressSync],
      ] as const) {
        const name = `packed-${encoding}-${randomUUID().slice(0, 8)}`;
        expect((await send(encoding, pack(json(name))).expect(201)).body.name).toBe(name);
      }
      const before = await rowCounts(t);
      const broken = await send('gzip', json('not-gzip'));
      expectFieldError(broken, 400, 'VALIDATION_FAILED', 'body');
      expect(broken.body.message).toBe('body could not be read');
      expect(await rowCounts(t)).toEqual(before);
    });
  });

  describe('a body that is not a JSON object', () => {
    it('an array, a string or no JSON at all → 400 naming body; an unknown charset or encoding → 415', async () => {
      const before = await rowCounts(t);
      expectFieldError(await postRaw('/api/v1/projects', '[{"name":"x"}]'), 400, 'VALIDATION_FAILED', 'body');
      expectFieldError(await postRaw('/api/v1/projects', '"x"'), 400, 'VALIDATION_FAILED', 'body');
      const bad = await postRaw('/api/v1/projects', '{"name":');
      expectFieldError(bad, 400, 'VALIDATION_FAILED', 'body');
      expect(bad.body.message).toBe('body is not valid JSON');
      const charset = await t.http
        .post('/api/v1/projects')
        .set(owner.auth)
        .set('Content-Type', 'application/json; charset=latin2')
        .send('{"name":"x"}');
      expectFieldError(charset, 415, 'UNSUPPORTED_MEDIA_TYPE', 'body');
      const encoding = await t.http
        .post('/api/v1/projects')
        .set(owner.auth)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'zz')
        .send('{"name":"x"}');
      expectFieldError(encoding, 415, 'UNSUPPORTED_MEDIA_TYPE', 'body');
      expect(await rowCounts(t)).toEqual(before);
    });
  });
});
