import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { jobSpec, makeProject, makeRun, setMembers } from '../support/factories';
import { rowCounts } from '../support/input-errors';
import { giveHistory } from '../support/submission-histories';

describe('runs: submit, get, stop, delete, history', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const base = () => `/api/v1/projects/${project}/runs`;

  it('submits a run with groups and replicas; every job starts with submission 0, submitted', async () => {
    const run = await makeRun(t, owner, project, {
      run_name: `nested-${Date.now()}`,
      attributes: { team: 'ml' },
      retry: { on_events: ['no_capacity', 'error'], max_attempts: 3 },
      job_groups: [{ ref: 'train' }, { ref: 'eval', parent_ref: 'train', cancel_after_n_failures: 2 }],
      jobs: [
        { spec: jobSpec() },
        { name: 'trainer', group_ref: 'train', replicas: 2, spec: jobSpec() },
        { group_ref: 'eval', spec: jobSpec() },
      ],
    });
    expect(run).toMatchObject({
      status: 'submitted',
      job_group_id: 0,
      attributes: { team: 'ml' },
      retry: { on_events: ['no_capacity', 'error'], max_attempts: 3 },
    });
    expect(run.jobs.map((j) => [j.job_num, j.replica_num, j.job_group_id])).toEqual([
      [0, 0, 0],
      [1, 0, 1],
      [1, 1, 1],
      [2, 0, 2],
    ]);
    for (const j of run.jobs) {
      expect(j.status).toBe('submitted');
      expect(j.submission_count).toBe(1);
      expect(j.job_submissions).toEqual([expect.objectContaining({ submission_num: 0, status: 'submitted' })]);
      expect(j.latest_job_submission?.id).toBe(j.job_submissions[0].id);
    }
    const root = await t.http.get(`${base()}/${run.id}/job-groups/0`).set(owner.auth).expect(200);
    expect(root.body.counts).toEqual({
      n_jobs: 4,
      n_completed: 0,
      n_succeeded: 0,
      n_failed: 0,
      n_cancelled: 0,
      n_pending: 0,
    });
    const train = await t.http.get(`${base()}/${run.id}/job-groups/1`).set(owner.auth).expect(200);
    expect(train.body).toMatchObject({ parent_id: 0, depth: 1, status: 'running', counts: { n_jobs: 3 } });
    const evalGroup = await t.http.get(`${base()}/${run.id}/job-groups/2`).set(owner.auth).expect(200);
    expect(evalGroup.body).toMatchObject({ parent_id: 1, depth: 2, cancel_after_n_failures: 2, counts: { n_jobs: 1 } });
    const got = await t.http.get(`${base()}/${run.id}`).set(owner.auth).expect(200);
    expect(got.body.jobs).toHaveLength(4);
  });

  it('generates unique run names and refuses a taken one with 409', async () => {
    const a = await makeRun(t, owner, project);
    const b = await makeRun(t, owner, project);
    expect(a.run_name).toMatch(/^[a-z]+-[a-z]+-[0-9a-f]{4}$/);
    expect(a.run_name).not.toBe(b.run_name);
    const dup = await t.http
      .post(base())
      .set(owner.auth)
      .send({ run_name: a.run_name, jobs: [{ spec: jobSpec() }] })
      .expect(409);
    expect(dup.body.code).toBe('ALREADY_EXISTS');
  });

  it('is idempotent with an Idempotency-Key: one run however often it is sent; another body is 409', async () => {
    const key = `submit-${Date.now()}`;
    const body = { jobs: [{ spec: jobSpec() }] };
    const before = await rowCounts(t);
    const first = await t.http.post(base()).set(owner.auth).set('Idempotency-Key', key).send(body).expect(201);
    const created = await rowCounts(t);
    expect(created).toMatchObject({ runs: before.runs + 1, jobs: before.jobs + 1 });
    const again = await t.http.post(base()).set(owner.auth).set('Idempotency-Key', key).send(body).expect(201);
    expect(again.body).toEqual(first.body);
    const other = await t.http
      .post(base())
      .set(owner.auth)
      .set('Idempotency-Key', key)
      .send({ jobs: [{ spec: jobSpec({ image: 'other' }) }] })
      .expect(409);
    expect(other.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
    // Neither the repeat nor the refused request wrote anything (a second run would get a new generated name).
    expect(await rowCounts(t)).toEqual(created);
  });

  it('refuses bad submissions with 400 naming the field and writes nothing', async () => {
    const before = await t.dataSource.query(
      'SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM jobs)::int AS jobs, ' +
        '(SELECT count(*) FROM job_groups)::int AS groups',
    );
    const cases: [unknown, string][] = [
      [{}, 'jobs'],
      [{ jobs: [] }, 'jobs'],
      [{ jobs: [{}] }, 'jobs[0].spec'],
      [{ jobs: [{ spec: { commands: [], resources: { cpu: 1, memory_mib: 1 } } }] }, 'jobs[0].spec.commands'],
      [{ jobs: [{ spec: jobSpec({ resources: { cpu: -1, memory_mib: 1 } }) }] }, 'jobs[0].spec.resources.cpu'],
      [
        { jobs: [{ spec: jobSpec({ resources: { cpu: 1, memory_mib: 'lots' } }) }] },
        'jobs[0].spec.resources.memory_mib',
      ],
      [{ jobs: [{ spec: jobSpec({ env: { 'bad key': 'x' } }) }] }, 'jobs[0].spec.env'],
      [{ jobs: [{ spec: jobSpec(), extra: true }] }, 'jobs[0].extra'],
      [{ jobs: [{ spec: jobSpec() }], surprise: 1 }, 'surprise'],
      [{ jobs: [{ spec: jobSpec(), replicas: 0 }] }, 'jobs[0].replicas'],
      [{ jobs: [{ spec: jobSpec(), replicas: 10001 }] }, 'jobs[0].replicas'],
      [{ jobs: [{ spec: jobSpec() }], retry: { on_events: ['sunspots'] } }, 'retry.on_events'],
      [{ jobs: [{ spec: jobSpec() }], run_name: 'Has Spaces' }, 'run_name'],
      [{ jobs: [{ spec: jobSpec(), group_ref: 'nowhere' }] }, 'jobs[0].group_ref'],
      [{ jobs: [{ spec: jobSpec() }], job_groups: [{ ref: 'a', parent_ref: 'b' }] }, 'job_groups.parent_ref'],
      [{ jobs: [{ spec: jobSpec() }], job_groups: [{ ref: 'a' }, { ref: 'a' }] }, 'job_groups[1].ref'],
      [
        {
          jobs: [{ spec: jobSpec() }],
          job_groups: [
            { ref: 'a', parent_ref: 'b' },
            { ref: 'b', parent_ref: 'a' },
          ],
        },
        'job_groups',
      ],
      [{ jobs: [{ spec: jobSpec() }], attributes: [1, 2] }, 'attributes'],
      [
        {
          jobs: [
            { spec: jobSpec(), replicas: 5000 },
            { spec: jobSpec(), replicas: 5001 },
          ],
        },
        'jobs',
      ],
    ];
    for (const [body, field] of cases) {
      const res = await t.http
        .post(base())
        .set(owner.auth)
        .send(body as object);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.code).toBe('VALIDATION_FAILED');
      expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const deep = await t.http
      .post(base())
      .set(owner.auth)
      .send({
        jobs: [{ spec: jobSpec() }],
        job_groups: ['a', 'b', 'c', 'd', 'e', 'f'].map((ref, i, all) =>
          i ? { ref, parent_ref: all[i - 1] } : { ref },
        ),
      })
      .expect(400);
    expect(deep.body.code).toBe('MAX_DEPTH_EXCEEDED');
    const after = await t.dataSource.query(
      'SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM jobs)::int AS jobs, ' +
        '(SELECT count(*) FROM job_groups)::int AS groups',
    );
    expect(after).toEqual(before);
  });

  it('hides other projects: their runs are 404, their project is 403', async () => {
    const run = await makeRun(t, owner, project);
    const stranger = await t.user();
    const strangerProject = (await makeProject(t, stranger)).name;
    await t.http.get(`${base()}/${run.id}`).set(stranger.auth).expect(403);
    await t.http.get(`/api/v1/projects/${strangerProject}/runs/${run.id}`).set(stranger.auth).expect(404);
    await t.http
      .post(`/api/v1/projects/${strangerProject}/runs/${run.id}/stop`)
      .set(stranger.auth)
      .send({})
      .expect(404);
    await t.http.get(`/api/v1/projects/${strangerProject}/runs/not-a-uuid`).set(stranger.auth).expect(404);
    const all = await t.http.get('/api/v1/runs').set(stranger.auth).expect(200);
    expect(all.body.items.map((r: { id: string }) => r.id)).not.toContain(run.id);
  });

  it('stops a run (cancel group 0), idempotently, then deletes it; delete refuses active runs', async () => {
    const run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 3 }] });
    const del = await t.http.delete(`${base()}/${run.id}`).set(owner.auth).expect(409);
    expect(del.body.code).toBe('RUN_NOT_FINISHED');
    const stopped = await t.http.post(`${base()}/${run.id}/stop`).set(owner.auth).send({}).expect(200);
    expect(stopped.body).toMatchObject({ status: 'terminated', termination_reason: 'stopped_by_user' });
    for (const j of stopped.body.jobs)
      expect(j).toMatchObject({
        status: 'terminated',
        termination_reason: 'stopped_by_user',
        cancelled_job_group_id: 0,
      });
    const root = await t.http.get(`${base()}/${run.id}/job-groups/0`).set(owner.auth).expect(200);
    expect(root.body).toMatchObject({
      status: 'cancelled',
      cancellation: { job_group_id: 0, cancelled_by: owner.name, reason: 'stopped_by_user' },
    });
    const again = await t.http.post(`${base()}/${run.id}/stop`).set(owner.auth).send({ abort: true }).expect(200);
    expect(again.body.termination_reason).toBe('stopped_by_user');
    const rows = await t.dataSource.query('SELECT count(*)::int AS n FROM job_groups_cancelled WHERE run_id = $1', [
      run.id,
    ]);
    expect(rows[0].n).toBe(1);
    await t.http.delete(`${base()}/${run.id}`).set(owner.auth).expect(204);
    await t.http.get(`${base()}/${run.id}`).set(owner.auth).expect(404);
    const list = await t.http.get(base()).set(owner.auth).query({ limit: 100 }).expect(200);
    expect(list.body.items.map((r: { id: string }) => r.id)).not.toContain(run.id);
    // the name is free again
    await makeRun(t, owner, project, { run_name: run.run_name });
  });

  it('aborting shows jobs as aborted', async () => {
    const run = await makeRun(t, owner, project);
    const res = await t.http.post(`${base()}/${run.id}/stop`).set(owner.auth).send({ abort: true }).expect(200);
    expect(res.body).toMatchObject({ status: 'terminated', termination_reason: 'aborted_by_user' });
    expect(res.body.jobs[0]).toMatchObject({ status: 'aborted', termination_reason: 'aborted_by_user' });
  });

  it('serves a job history newest first, paginated', async () => {
    const run = await makeRun(t, owner, project);
    const job = run.jobs[0];
    const url = `${base()}/${run.id}/jobs/${job.id}/submissions`;
    const fresh = await t.http.get(url).set(owner.auth).expect(200);
    expect(fresh.body).toEqual({
      items: [expect.objectContaining({ id: job.latest_job_submission?.id, submission_num: 0 })],
      next_cursor: null,
    });
    // Five attempts (numbers 0, 1, 3, 4, 6: gaps, as folding leaves them), in pages of two.
    const written = await giveHistory(t, job.id, [0, 1, 3, 4, 6]);
    const pages: { items: { id: string; submission_num: number }[]; next_cursor: string | null }[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: (typeof pages)[number] } = await t.http
        .get(url)
        .query(cursor ? { limit: 2, cursor } : { limit: 2 })
        .set(owner.auth)
        .expect(200);
      pages.push(res.body);
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(pages.map((p) => p.items.map((s) => s.submission_num))).toEqual([[6, 4], [3, 1], [0]]);
    expect(pages.flatMap((p) => p.items.map((s) => s.id))).toEqual(written.map((w) => w.id).reverse());
    await t.http
      .get(`${base()}/${run.id}/jobs/00000000-0000-0000-0000-000000000000/submissions`)
      .set(owner.auth)
      .expect(404);
  });

  it('lets project members read runs and refuses outsiders', async () => {
    const member = await t.user();
    const outsider = await t.user();
    await setMembers(t, owner, project, [
      { user: owner.name, role: 'admin' },
      { user: member.name, role: 'user' },
    ]);
    const run = await makeRun(t, owner, project);
    const read = await t.http.get(`${base()}/${run.id}`).set(member.auth).expect(200);
    expect(read.body.id).toBe(run.id);
    const listed = await t.http.get(base()).set(member.auth).query({ limit: 100 }).expect(200);
    expect(listed.body.items.map((r: { id: string }) => r.id)).toContain(run.id);
    for (const path of [`${base()}/${run.id}`, base(), `${base()}/${run.id}/job-groups/0`]) {
      const res = await t.http.get(path).set(outsider.auth).expect(403);
      expect(res.body.code).toBe('FORBIDDEN');
    }
    await t.http.post(`${base()}/${run.id}/stop`).set(outsider.auth).send({}).expect(403);
    expect((await t.http.get(`${base()}/${run.id}`).set(owner.auth).expect(200)).body.status).toBe('submitted');
  });
});
