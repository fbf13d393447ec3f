import { DONE } from '../../bench/reference-worker';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, describeRealPostgres, TestApp } from '../support/test-app';
import { claimFor, makeWorker } from '../support/workers';

/** Every limit set explicitly: createTestApp writes into process.env, which the next app of this file would inherit. */
const limits = (overrides: Record<string, string>) => ({
  RUNPLANE_RATE_LIMIT_WINDOW_SECONDS: '60',
  RUNPLANE_RATE_LIMIT_USER_REQUESTS: '30000',
  RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS: '600000',
  RUNPLANE_MAX_TOKENS_PER_USER: '100',
  RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT: '0',
  ...overrides,
});

describe('request rate limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(
      limits({ RUNPLANE_RATE_LIMIT_USER_REQUESTS: '5', RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS: '0' }),
    );
  });
  afterAll(() => t.close());

  it('answers 429 RATE_LIMITED with Retry-After past the limit, per principal (all its tokens), not IP', async () => {
    const user = await t.user();
    for (let i = 0; i < 5; i++) await t.http.get('/api/v1/users/me').set(user.auth).expect(200);
    const refused = await t.http.get('/api/v1/users/me').set(user.auth).expect(429);
    expect(refused.body).toMatchObject({ status_code: 429, code: 'RATE_LIMITED' });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Refused requests do nothing: a POST past the limit writes nothing.
    const before = await t.dataSource.query('SELECT count(*)::int AS n FROM projects');
    expect((await t.http.post('/api/v1/projects').set(user.auth).send({ name: 'never-made' })).status).toBe(429);
    expect(await t.dataSource.query('SELECT count(*)::int AS n FROM projects')).toEqual(before);

    // Another user from the same address is not affected.
    const other = await t.user();
    await t.http.get('/api/v1/users/me').set(other.auth).expect(200);
    // Public routes are not counted.
    await t.http.get('/healthz').expect(200);
  });

  it('counts a second token of the same user against the same limit', async () => {
    const user = await t.user();
    const second = (await t.http.post('/api/v1/users/me/tokens').set(user.auth).expect(201)).body.token as string;
    for (let i = 0; i < 4; i++) await t.http.get('/api/v1/users/me').set(user.auth).expect(200);
    const res = await t.http.get('/api/v1/users/me').set({ Authorization: `Bearer ${second}` });
    expect(res.status).toBe(429);
  });

  it('0 turns a limit off (service tokens here)', async () => {
    const service = await t.user('service');
    // A service token on a user route is refused as FORBIDDEN, but counted first: never 429 with the limit off.
    for (let i = 0; i < 12; i++) await t.http.get('/api/v1/users/me').set(service.auth).expect(403);
  });
});

describe('tokens per user', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(limits({ RUNPLANE_MAX_TOKENS_PER_USER: '3' }));
  });
  afterAll(() => t.close());

  it('refuses a token past the cap with 409 TOKEN_LIMIT_REACHED; revoking one makes room', async () => {
    const user = await t.user(); // one live token already
    const issued: { id: string; token: string; created_at: string }[] = [];
    for (let i = 0; i < 2; i++)
      issued.push((await t.http.post('/api/v1/users/me/tokens').set(user.auth).expect(201)).body);
    expect(issued[0]).toEqual({
      id: expect.any(String),
      token: expect.stringMatching(/^rp_/),
      created_at: expect.any(String),
    });
    const refused = await t.http.post('/api/v1/users/me/tokens').set(user.auth).expect(409);
    expect(refused.body.code).toBe('TOKEN_LIMIT_REACHED');
    expect(refused.body.message).toMatch(/DELETE \/api\/v1\/users\/me\/tokens\/\{id\}/);

    const listed = await t.http.get('/api/v1/users/me/tokens').set(user.auth).expect(200);
    expect(listed.body.items).toHaveLength(3);
    expect(listed.body.next_cursor).toBeNull();
    for (const item of listed.body.items) expect(Object.keys(item).sort()).toEqual(['created_at', 'id']);
    expect(JSON.stringify(listed.body)).not.toContain(issued[0].token);
    const page = await t.http.get('/api/v1/users/me/tokens').query({ limit: 2 }).set(user.auth).expect(200);
    const rest = await t.http
      .get('/api/v1/users/me/tokens')
      .query({ limit: 2, cursor: page.body.next_cursor })
      .set(user.auth)
      .expect(200);
    expect([...page.body.items, ...rest.body.items]).toEqual(listed.body.items);

    // A revoked token stops working at once, even though it was just used (and so cached).
    const revoked = { Authorization: `Bearer ${issued[0].token}` };
    await t.http.get('/api/v1/users/me').set(revoked).expect(200);
    await t.http.delete(`/api/v1/users/me/tokens/${issued[0].id}`).set(user.auth).expect(204);
    await t.http.get('/api/v1/users/me').set(revoked).expect(401);
    await t.http.delete(`/api/v1/users/me/tokens/${issued[0].id}`).set(user.auth).expect(404);
    await t.http.post('/api/v1/users/me/tokens').set(user.auth).expect(201);

    // Another user's token is not found, and a malformed id is a 404 too, never a 500.
    const stranger = await t.user();
    await t.http.delete(`/api/v1/users/me/tokens/${issued[1].id}`).set(stranger.auth).expect(404);
    await t.http.delete('/api/v1/users/me/tokens/not-a-uuid').set(stranger.auth).expect(404);
    await t.http.get('/api/v1/users/me/tokens').query({ cursor: 'bad' }).set(stranger.auth).expect(400);
  });

  describeRealPostgres('under concurrency', () => {
    it('never lets concurrent requests pass the cap', async () => {
      const user = await t.user(); // 1 of 3
      const results = await Promise.all(
        Array.from({ length: 6 }, () => t.http.post('/api/v1/users/me/tokens').set(user.auth)),
      );
      expect(results.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409, 409]);
      const rows = await t.dataSource.query('SELECT count(*)::int AS n FROM api_tokens WHERE user_id = $1', [user.id]);
      expect(rows[0].n).toBe(3);
    });
  });
});

describe('idempotency keys keep a reference, not the response', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(limits({}));
  });
  afterAll(() => t.close());

  const keyRow = async (key: string) =>
    (
      await t.dataSource.query(
        `SELECT resource_kind, resource_id, response_status, pg_column_size(k.*) AS bytes FROM idempotency_keys k
           WHERE key = $1`,
        [key],
      )
    )[0];

  it('a repeated run submission returns the same run, now, and stores a row of a few hundred bytes', async () => {
    const owner = await t.user();
    const project = await makeProject(t, owner);
    const key = `run-${Date.now()}`;
    const body = { jobs: [{ replicas: 50, spec: jobSpec() }] };
    const first = await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send(body)
      .expect(201);
    expect(JSON.stringify(first.body).length).toBeGreaterThan(10_000);
    const row = await keyRow(key);
    expect(row).toMatchObject({ resource_kind: 'run', resource_id: first.body.id, response_status: 201 });
    expect(row.bytes).toBeLessThan(400);
    const columns = await t.dataSource.query(
      `SELECT column_name FROM information_schema.columns
         WHERE table_name = 'idempotency_keys' AND data_type IN ('jsonb', 'json')`,
    );
    expect(columns).toEqual([]);

    const again = await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send(body)
      .expect(201);
    expect(again.body).toEqual(first.body);

    // A repeat answers with the run as it is now (Stripe-like), not as it was.
    await t.http
      .post(`/api/v1/projects/${project.name}/runs/${first.body.id}/stop`)
      .set(owner.auth)
      .send({})
      .expect(200);
    const later = await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send(body)
      .expect(201);
    expect(later.body.id).toBe(first.body.id);
    expect(later.body.jobs.map((j: { id: string }) => j.id)).toEqual(first.body.jobs.map((j: { id: string }) => j.id));
    expect(later.body.status).not.toBe(first.body.status);
    const runs = await t.dataSource.query('SELECT count(*)::int AS n FROM runs WHERE project_id = $1', [project.id]);
    expect(runs[0].n).toBe(1);

    const other = await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(409);
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
  });

  it('a repeated add-jobs returns the same batch only, a repeated group and project the same object', async () => {
    const owner = await t.user();
    const project = await makeProject(t, owner);
    const run = await makeRun(t, owner, project.name);
    const base = `/api/v1/projects/${project.name}/runs/${run.id}/job-groups`;

    const groupKey = `group-${Date.now()}`;
    const group = await t.http
      .post(base)
      .set(owner.auth)
      .set('Idempotency-Key', groupKey)
      .send({ parent_id: 0 })
      .expect(201);
    const groupAgain = await t.http
      .post(base)
      .set(owner.auth)
      .set('Idempotency-Key', groupKey)
      .send({ parent_id: 0 })
      .expect(201);
    expect(groupAgain.body).toEqual(group.body);
    expect(await keyRow(groupKey)).toMatchObject({
      resource_kind: 'job_group',
      resource_id: String(group.body.job_group_id),
    });

    const jobsKey = `jobs-${Date.now()}`;
    const add = { jobs: [{ replicas: 2, spec: jobSpec() }, { spec: jobSpec() }] };
    const added = await t.http
      .post(`${base}/${group.body.job_group_id}/jobs`)
      .set(owner.auth)
      .set('Idempotency-Key', jobsKey)
      .send(add)
      .expect(201);
    expect(added.body.jobs).toHaveLength(3);
    // More jobs after the batch: the repeat still answers with its own batch.
    await t.http.post(`${base}/${group.body.job_group_id}/jobs`).set(owner.auth).send(add).expect(201);
    const addedAgain = await t.http
      .post(`${base}/${group.body.job_group_id}/jobs`)
      .set(owner.auth)
      .set('Idempotency-Key', jobsKey)
      .send(add)
      .expect(201);
    expect(addedAgain.body).toEqual(added.body);
    expect(await keyRow(jobsKey)).toMatchObject({
      resource_kind: 'jobs',
      resource_id: String(added.body.jobs[0].job_num),
    });
    const jobs = await t.dataSource.query('SELECT count(*)::int AS n FROM jobs WHERE run_id = $1', [run.id]);
    expect(jobs[0].n).toBe(1 + 3 + 3);

    const projectKey = `project-${Date.now()}`;
    const name = `idem-ref-${Date.now()}`;
    const created = await t.http
      .post('/api/v1/projects')
      .set(owner.auth)
      .set('Idempotency-Key', projectKey)
      .send({ name })
      .expect(201);
    await t.http.patch(`/api/v1/projects/${name}`).set(owner.auth).send({ billing_limit_usd: 5 }).expect(200);
    const createdAgain = await t.http
      .post('/api/v1/projects')
      .set(owner.auth)
      .set('Idempotency-Key', projectKey)
      .send({ name })
      .expect(201);
    expect(createdAgain.body).toEqual({ ...created.body, billing_limit_usd: 5 });
  });
});

describe('queued jobs per project', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(limits({ RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT: '5' }));
  });
  afterAll(() => t.close());

  const written = async (projectId: string) =>
    (
      await t.dataSource.query(
        `SELECT (SELECT count(*) FROM runs WHERE project_id = $1)::int AS runs,
                (SELECT count(*) FROM jobs j JOIN runs r ON r.id = j.run_id WHERE r.project_id = $1)::int AS jobs,
                (SELECT count(*) FROM job_groups g JOIN runs r ON r.id = g.run_id
                 WHERE r.project_id = $1)::int AS groups,
                (SELECT count(*) FROM idempotency_keys)::int AS keys`,
        [projectId],
      )
    )[0];

  it('refuses a submit or add-jobs past the limit with 409 QUEUE_LIMIT_EXCEEDED and writes nothing', async () => {
    const owner = await t.user();
    const project = await makeProject(t, owner);
    // Claimed ahead of what earlier tests of this file left queued.
    const run = await makeRun(t, owner, project.name, { priority: 100, jobs: [{ replicas: 3, spec: jobSpec() }] });
    const before = await written(project.id);

    const refused = await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .set('Idempotency-Key', `queue-${Date.now()}`)
      .send({ job_groups: [{ ref: 'a' }], jobs: [{ replicas: 3, group_ref: 'a', spec: jobSpec() }] })
      .expect(409);
    expect(refused.body.code).toBe('QUEUE_LIMIT_EXCEEDED');
    expect(refused.body.message).toMatch(/3 unfinished jobs/);
    const addRefused = await t.http
      .post(`/api/v1/projects/${project.name}/runs/${run.id}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ replicas: 3, spec: jobSpec() }] })
      .expect(409);
    expect(addRefused.body.code).toBe('QUEUE_LIMIT_EXCEEDED');
    expect(await written(project.id)).toEqual(before);

    // Up to the limit is fine; another project has its own.
    await t.http
      .post(`/api/v1/projects/${project.name}/runs/${run.id}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ replicas: 2, spec: jobSpec() }] })
      .expect(201);
    await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(409);
    const elsewhere = await makeProject(t, owner);
    await makeRun(t, owner, elsewhere.name, { jobs: [{ replicas: 5, spec: jobSpec() }] });

    // Finished jobs free their places.
    const worker = makeWorker(t, await t.user('service'), 'queue-limit-worker');
    const claimed = await claimFor(worker, run.id, 2);
    expect(claimed).toHaveLength(2);
    for (const s of claimed) {
      expect((await worker.running(s.id)).status).toBe(200);
      expect((await worker.complete(s.id, DONE)).status).toBe(200);
    }
    await makeRun(t, owner, project.name, { jobs: [{ replicas: 2, spec: jobSpec() }] });
    await t.http
      .post(`/api/v1/projects/${project.name}/runs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec() }] })
      .expect(409);
  });

  describeRealPostgres('under concurrency', () => {
    it('lets exactly one of three concurrent submissions through when only one fits', async () => {
      const owner = await t.user();
      const project = await makeProject(t, owner);
      const submit = () =>
        t.http
          .post(`/api/v1/projects/${project.name}/runs`)
          .set(owner.auth)
          .send({ jobs: [{ replicas: 3, spec: jobSpec() }] });
      const results = await Promise.all([submit(), submit(), submit()]);
      expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409]);
      expect((await written(project.id)).jobs).toBe(3);
    });
  });
});

describe('PATCH /projects/{p}: only fields present change', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(limits({}));
  });
  afterAll(() => t.close());

  it('{} keeps billing_limit_usd, a value sets it, null clears it', async () => {
    const owner = await t.user();
    const project = await makeProject(t, owner, { billing_limit_usd: 10 });
    const url = `/api/v1/projects/${project.name}`;
    expect((await t.http.patch(url).set(owner.auth).send({}).expect(200)).body.billing_limit_usd).toBe(10);
    expect((await t.http.get(url).set(owner.auth).expect(200)).body.billing_limit_usd).toBe(10);
    expect(
      (await t.http.patch(url).set(owner.auth).send({ billing_limit_usd: 20 }).expect(200)).body.billing_limit_usd,
    ).toBe(20);
    expect(
      (await t.http.patch(url).set(owner.auth).send({ billing_limit_usd: null }).expect(200)).body.billing_limit_usd,
    ).toBeNull();
    expect((await t.http.get(url).set(owner.auth).expect(200)).body.billing_limit_usd).toBeNull();
    expect((await t.http.patch(url).set(owner.auth).send({}).expect(200)).body.billing_limit_usd).toBeNull();
  });
});
