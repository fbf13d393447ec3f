import { createTestApp, TestApp } from '../support/test-app';
import { makeProject, setMembers } from '../support/factories';

describe('foundation: auth, errors, projects, operations', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('serves health, readiness, metrics and OpenAPI without a token', async () => {
    await t.http.get('/healthz').expect(200, { status: 'ok' });
    const ready = await t.http.get('/readyz').expect(200);
    expect(ready.body.details).toMatchObject({ database: { status: 'up' }, migrations: { status: 'up' } });
    await t.http.get('/api/v1/projects').expect(401);
    await t.http.get('/no/such/route').expect(404);
    // Every request is timed by route pattern, including those the guard refuses and those no route matches. A
    // request is counted on its response's 'finish', which may come just after the client has read the response.
    const wanted = [
      /runplane_http_request_duration_seconds_count\{[^}]*route="\/healthz"[^}]*status="200"/,
      /runplane_http_request_duration_seconds_count\{[^}]*route="\/api\/v1\/projects"[^}]*status="401"/,
      /runplane_http_request_duration_seconds_count\{.*status="404"\}/,
    ];
    let metrics = await t.http.get('/metrics').expect(200);
    for (let i = 0; i < 40 && !wanted.every((w) => w.test(metrics.text)); i++) {
      await new Promise((r) => setTimeout(r, 25));
      metrics = await t.http.get('/metrics').expect(200);
    }
    for (const w of wanted) expect(metrics.text).toMatch(w);
    expect(metrics.headers['content-type']).toContain('text/plain');
    await t.http.get('/docs').expect(200);
    const doc = await t.http.get('/docs-json').expect(200);
    expect(Object.keys(doc.body.paths)).toContain('/api/v1/projects');
  });

  it('echoes a sane request id and makes one otherwise', async () => {
    const given = await t.http.get('/healthz').set('X-Request-Id', 'abc-123').expect(200);
    expect(given.headers['x-request-id']).toBe('abc-123');
    const made = await t.http.get('/healthz').set('X-Request-Id', 'bad id with spaces').expect(200);
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers 401 with the error shape for missing, malformed and unknown tokens', async () => {
    for (const header of [undefined, 'Bearer', 'Basic abc', 'Bearer not-a-token']) {
      const req = t.http.get('/api/v1/projects');
      const res = await (header ? req.set('Authorization', header) : req).expect(401);
      expect(res.body).toEqual({ status_code: 401, code: 'UNAUTHENTICATED', message: expect.any(String), details: [] });
    }
  });

  it('keeps users off admin routes and service accounts off public routes', async () => {
    const user = await t.user();
    const service = await t.user('service');
    await t.http.post('/api/v1/users').set(user.auth).send({ name: 'x', global_role: 'user' }).expect(403);
    const res = await t.http.get('/api/v1/projects').set(service.auth).expect(403);
    expect(res.body.code).toBe('FORBIDDEN');
  });

  it('lets an admin create users whose tokens work, and users mint more tokens', async () => {
    const admin = await t.user('admin');
    const created = await t.http
      .post('/api/v1/users')
      .set(admin.auth)
      .send({ name: `u-${Date.now()}`, global_role: 'user' })
      .expect(201);
    expect(created.body.user).toMatchObject({ global_role: 'user' });
    const auth = { Authorization: `Bearer ${created.body.token}` };
    const me = await t.http.get('/api/v1/users/me').set(auth).expect(200);
    expect(me.body.id).toBe(created.body.user.id);
    const second = await t.http.post('/api/v1/users/me/tokens').set(auth).expect(201);
    await t.http
      .get('/api/v1/users/me')
      .set({ Authorization: `Bearer ${second.body.token}` })
      .expect(200);
    const stored = await t.dataSource.query('SELECT token_hash FROM api_tokens WHERE user_id = $1', [
      created.body.user.id,
    ]);
    expect(stored).toHaveLength(2);
    for (const row of stored) expect(row.token_hash).not.toContain(created.body.token);
    await t.http
      .post('/api/v1/users')
      .set(admin.auth)
      .send({ name: created.body.user.name, global_role: 'user' })
      .expect(409);
  });

  it('rejects bad bodies, unknown fields and malformed JSON with 400 naming the field, writing nothing', async () => {
    const user = await t.user();
    const before = await t.dataSource.query('SELECT count(*)::int AS n FROM projects');
    const cases: [unknown, string][] = [
      [{ name: 'ok-name', extra: 1 }, 'extra'],
      [{ name: 42 }, 'name'],
      [{ name: 'Bad Name!' }, 'name'],
      [{ name: 'x'.repeat(500) }, 'name'],
      [{ name: 'fine', billing_limit_usd: -1 }, 'billing_limit_usd'],
      [{ name: 'fine', billing_limit_usd: 'lots' }, 'billing_limit_usd'],
      [{}, 'name'],
    ];
    for (const [body, field] of cases) {
      const res = await t.http
        .post('/api/v1/projects')
        .set(user.auth)
        .send(body as object)
        .expect(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
      expect(res.body.message).toContain(field);
    }
    const malformed = await t.http
      .post('/api/v1/projects')
      .set(user.auth)
      .set('Content-Type', 'application/json')
      .send('{"name": ')
      .expect(400);
    expect(malformed.body.code).toBe('VALIDATION_FAILED');
    const after = await t.dataSource.query('SELECT count(*)::int AS n FROM projects');
    expect(after[0].n).toBe(before[0].n);
  });

  it('scopes projects to members: 403 for outsiders, 404 for missing, admins see all', async () => {
    const owner = await t.user();
    const outsider = await t.user();
    const admin = await t.user('admin');
    const project = await makeProject(t, owner);
    await t.http.get(`/api/v1/projects/${project.name}`).set(outsider.auth).expect(403);
    await t.http.get('/api/v1/projects/does-not-exist').set(outsider.auth).expect(404);
    await t.http.get(`/api/v1/projects/${project.name}`).set(admin.auth).expect(200);
    const outsiderList = await t.http.get('/api/v1/projects').set(outsider.auth).expect(200);
    expect(outsiderList.body.items.map((p: { name: string }) => p.name)).not.toContain(project.name);
    // The admin, a member of nothing, lists every project of the database.
    const listed: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: { name: string }[]; next_cursor: string | null } } = await t.http
        .get('/api/v1/projects')
        .query(cursor ? { limit: 100, cursor } : { limit: 100 })
        .set(admin.auth)
        .expect(200);
      listed.push(...res.body.items.map((p) => p.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    const all: { name: string }[] = await t.dataSource.query('SELECT name FROM projects');
    expect([...listed].sort()).toEqual(all.map((p) => p.name).sort());
    expect(listed).toContain(project.name);
    const ownerView = await t.http.get(`/api/v1/projects/${project.name}`).set(owner.auth).expect(200);
    expect(ownerView.body.members).toEqual([{ user: owner.name, role: 'admin' }]);
  });

  it('replaces members, refusing unknown users, duplicates and losing the last admin', async () => {
    const owner = await t.user();
    const other = await t.user();
    const project = await makeProject(t, owner);
    await setMembers(t, owner, project.name, [
      { user: owner.name, role: 'admin' },
      { user: other.name, role: 'user' },
    ]);
    await t.http.get(`/api/v1/projects/${project.name}`).set(other.auth).expect(200);
    await t.http
      .put(`/api/v1/projects/${project.name}/members`)
      .set(other.auth)
      .send({ members: [{ user: other.name, role: 'admin' }] })
      .expect(403);
    const noAdmin = await t.http
      .put(`/api/v1/projects/${project.name}/members`)
      .set(owner.auth)
      .send({ members: [{ user: owner.name, role: 'user' }] })
      .expect(400);
    expect(noAdmin.body.code).toBe('VALIDATION_FAILED');
    await t.http
      .put(`/api/v1/projects/${project.name}/members`)
      .set(owner.auth)
      .send({ members: [{ user: 'nobody-here', role: 'admin' }] })
      .expect(400);
    await t.http
      .put(`/api/v1/projects/${project.name}/members`)
      .set(owner.auth)
      .send({
        members: [
          { user: owner.name, role: 'admin' },
          { user: owner.name, role: 'user' },
        ],
      })
      .expect(400);
    const view = await t.http.get(`/api/v1/projects/${project.name}`).set(owner.auth).expect(200);
    expect(view.body.members).toHaveLength(2);
  });

  it('paginates projects with an opaque cursor and rejects forged cursors', async () => {
    const owner = await t.user();
    const names = new Set<string>();
    for (let i = 0; i < 5; i++) names.add((await makeProject(t, owner)).name);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: { name: string }[]; next_cursor: string | null } } = await t.http
        .get('/api/v1/projects')
        .query(cursor ? { limit: 2, cursor } : { limit: 2 })
        .set(owner.auth)
        .expect(200);
      seen.push(...res.body.items.map((p) => p.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(seen.sort()).toEqual([...names].sort());
    await t.http.get('/api/v1/projects').query({ cursor: 'garbage' }).set(owner.auth).expect(400);
    await t.http.get('/api/v1/projects').query({ limit: 101 }).set(owner.auth).expect(400);
  });

  it('replays a creating POST with the same Idempotency-Key and refuses a different body', async () => {
    const owner = await t.user();
    const key = `key-${Date.now()}`;
    const name = `idem-${Date.now()}`;
    const first = await t.http
      .post('/api/v1/projects')
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send({ name })
      .expect(201);
    const again = await t.http
      .post('/api/v1/projects')
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send({ name })
      .expect(201);
    expect(again.body).toEqual(first.body);
    const other = await t.http
      .post('/api/v1/projects')
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send({ name: `${name}-2` })
      .expect(409);
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    const rows = await t.dataSource.query('SELECT count(*)::int AS n FROM projects WHERE name LIKE $1', [`${name}%`]);
    expect(rows[0].n).toBe(1);
  });
});
