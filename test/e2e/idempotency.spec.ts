import { COUNTER_TOKENS } from '../../src/modules/job-groups/counter-tokens';
import { jobSpec, makeProject, makeRun, RunResponse, setMembers } from '../support/factories';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';

/**
 * Idempotency-Key on the job-group routes: `POST .../job-groups` and `POST .../job-groups/{g}/jobs`. The same key
 * and body answer the same object (as it is now) and write nothing more; the same key with another body, or on
 * another route, is 409 IDEMPOTENCY_KEY_REUSED and writes nothing. Keys are per user.
 */
describe('Idempotency-Key on job groups and added jobs', () => {
  let t: TestApp;
  let owner: TestUser;
  let member: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    member = await t.user();
    project = (await makeProject(t, owner)).name;
    await setMembers(t, owner, project, [
      { user: owner.name, role: 'admin' },
      { user: member.name, role: 'user' },
    ]);
  });
  afterAll(() => t.close());

  const groupsUrl = (run: RunResponse) => `/api/v1/projects/${project}/runs/${run.id}/job-groups`;
  const post = (url: string, key: string, body: object, user = owner) =>
    t.http.post(url).set(user.auth).set('Idempotency-Key', key).send(body);

  /** Every row a group or job creation writes for the run, and the keys stored. */
  const written = async (run: RunResponse) =>
    (
      await t.dataSource.query(
        `SELECT (SELECT count(*) FROM job_groups WHERE run_id = $1)::int AS groups,
                (SELECT count(*) FROM job_group_self_and_ancestors WHERE run_id = $1)::int AS closure,
                (SELECT count(*) FROM job_group_counters WHERE run_id = $1)::int AS counters,
                (SELECT sum(n_jobs)::int FROM job_group_counters WHERE run_id = $1 AND job_group_id = 0) AS root_jobs,
                (SELECT count(*) FROM jobs WHERE run_id = $1)::int AS jobs,
                (SELECT count(*) FROM job_submissions WHERE run_id = $1)::int AS submissions,
                (SELECT count(*) FROM idempotency_keys WHERE user_id = ANY($2::uuid[]))::int AS keys`,
        [run.id, [owner.id, member.id]],
      )
    )[0];

  describe('POST .../job-groups', () => {
    it('the same key and body: 201 with the same group, and no second write', async () => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('group');
      const body = { parent_id: 0, attributes: { stage: 'train', n: 1 }, cancel_after_n_failures: 2 };
      const first = await post(groupsUrl(run), key, body).expect(201);
      const after = await written(run);
      expect(after).toMatchObject({ groups: 2, closure: 3, counters: 2 * COUNTER_TOKENS });
      const again = await post(groupsUrl(run), key, body).expect(201);
      expect(again.body).toEqual(first.body);
      // The same body with its keys in another order is the same request.
      const reordered = await post(groupsUrl(run), key, {
        cancel_after_n_failures: 2,
        attributes: { n: 1, stage: 'train' },
        parent_id: 0,
      }).expect(201);
      expect(reordered.body).toEqual(first.body);
      expect(await written(run)).toEqual(after);
    });

    it('a repeat answers the group as it is now (Stripe-like), still without writing', async () => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('group');
      const first = await post(groupsUrl(run), key, { parent_id: 0 }).expect(201);
      const g = first.body.job_group_id;
      await t.http
        .post(`${groupsUrl(run)}/${g}/jobs`)
        .set(owner.auth)
        .send({ jobs: [{ spec: jobSpec(), replicas: 2 }] })
        .expect(201);
      const before = await written(run);
      const again = await post(groupsUrl(run), key, { parent_id: 0 }).expect(201);
      // An empty group was complete; with two queued jobs it runs.
      expect(first.body).toMatchObject({ state: 'complete', status: 'success', counts: { n_jobs: 0 } });
      expect(again.body).toEqual({
        ...first.body,
        state: 'running',
        status: 'running',
        counts: { ...first.body.counts, n_jobs: 2 },
      });
      expect(await written(run)).toEqual(before);
    });

    it.each<[string, object]>([
      ['another parent', { parent_id: 1 }],
      ['other attributes', { parent_id: 0, attributes: { stage: 'eval' } }],
      ['a fail-fast threshold added', { parent_id: 0, cancel_after_n_failures: 1 }],
    ])('the same key with another body (%s): 409 IDEMPOTENCY_KEY_REUSED, nothing written', async (_label, other) => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('group');
      await post(groupsUrl(run), key, { parent_id: 0 }).expect(201);
      const before = await written(run);
      const res = await post(groupsUrl(run), key, other).expect(409);
      expect(res.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(await written(run)).toEqual(before);
    });

    it('the same key on another route (another run, add-jobs) is another request: 409, nothing written', async () => {
      const run = await makeRun(t, owner, project);
      const other = await makeRun(t, owner, project);
      const key = uniqueName('group');
      await post(groupsUrl(run), key, { parent_id: 0 }).expect(201);
      const before = [await written(run), await written(other)];
      expect((await post(groupsUrl(other), key, { parent_id: 0 }).expect(409)).body.code).toBe(
        'IDEMPOTENCY_KEY_REUSED',
      );
      await post(`${groupsUrl(run)}/0/jobs`, key, { jobs: [{ spec: jobSpec() }] }).expect(409);
      expect([await written(run), await written(other)]).toEqual(before);
    });

    it('keys are per user: another member’s same key and body create their own group', async () => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('group');
      const mine = await post(groupsUrl(run), key, { parent_id: 0 }).expect(201);
      const theirs = await post(groupsUrl(run), key, { parent_id: 0 }, member).expect(201);
      expect(theirs.body.job_group_id).not.toBe(mine.body.job_group_id);
      expect(await written(run)).toMatchObject({ groups: 3 });
    });
  });

  describe('POST .../job-groups/{g}/jobs', () => {
    const body = {
      jobs: [
        { spec: jobSpec(), replicas: 3 },
        { name: 'eval', spec: jobSpec() },
      ],
    };

    it('the same key and body: 201 with the same jobs, and no second write', async () => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('jobs');
      const first = await post(`${groupsUrl(run)}/0/jobs`, key, body).expect(201);
      expect(first.body.jobs).toHaveLength(4);
      const after = await written(run);
      expect(after).toMatchObject({ jobs: 1 + 4, submissions: 1 + 4, root_jobs: 1 + 4 });
      const again = await post(`${groupsUrl(run)}/0/jobs`, key, body).expect(201);
      expect(again.body).toEqual(first.body);
      expect(await written(run)).toEqual(after);
    });

    it.each<[string, object]>([
      [
        'more replicas',
        {
          jobs: [
            { spec: jobSpec(), replicas: 4 },
            { name: 'eval', spec: jobSpec() },
          ],
        },
      ],
      [
        'another spec',
        {
          jobs: [
            { spec: jobSpec({ image: 'other' }), replicas: 3 },
            { name: 'eval', spec: jobSpec() },
          ],
        },
      ],
      ['a job fewer', { jobs: [{ spec: jobSpec(), replicas: 3 }] }],
    ])('the same key with another body (%s): 409 IDEMPOTENCY_KEY_REUSED, nothing written', async (_label, other) => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('jobs');
      await post(`${groupsUrl(run)}/0/jobs`, key, body).expect(201);
      const before = await written(run);
      const res = await post(`${groupsUrl(run)}/0/jobs`, key, other).expect(409);
      expect(res.body.code).toBe('IDEMPOTENCY_KEY_REUSED');
      expect(await written(run)).toEqual(before);
    });

    it('the same key and body on another group is another request: 409, nothing written', async () => {
      const run = await makeRun(t, owner, project);
      const g = (await t.http.post(groupsUrl(run)).set(owner.auth).send({ parent_id: 0 }).expect(201)).body
        .job_group_id;
      const key = uniqueName('jobs');
      await post(`${groupsUrl(run)}/0/jobs`, key, body).expect(201);
      const before = await written(run);
      expect((await post(`${groupsUrl(run)}/${g}/jobs`, key, body).expect(409)).body.code).toBe(
        'IDEMPOTENCY_KEY_REUSED',
      );
      expect(await written(run)).toEqual(before);
    });

    it('a refused first request stores no key: the same key works once the request can succeed', async () => {
      const run = await makeRun(t, owner, project);
      const key = uniqueName('jobs');
      const before = await written(run);
      // Group 9 does not exist: 404, and the key is not taken.
      await post(`${groupsUrl(run)}/9/jobs`, key, body).expect(404);
      expect(await written(run)).toEqual(before);
      const ok = await post(`${groupsUrl(run)}/0/jobs`, key, body).expect(201);
      expect(ok.body.jobs).toHaveLength(4);
    });
  });
});
