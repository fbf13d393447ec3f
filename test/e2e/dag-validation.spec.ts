import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { createTestApp, TestApp, TestUser } from '../support/test-app';

const job = (ref: string, depends_on: string[] = [], extra: Record<string, unknown> = {}) => ({
  name: ref,
  ref,
  depends_on,
  spec: jobSpec(),
  ...extra,
});

describe('dependencies: every bad input is a 400 DEPENDENCY_INVALID naming the job, nothing written', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  let other: RunResponse;
  let run: RunResponse;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'dagbad' });
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
    other = await makeRun(t, owner, project, { jobs: [job('x')] });
    run = await makeRun(t, owner, project, { jobs: [job('y')] });
  });
  afterAll(() => t.close());

  const counts = async () =>
    (
      await t.dataSource.query(
        `SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM jobs)::int AS jobs,
                (SELECT count(*) FROM job_parents)::int AS edges, (SELECT count(*) FROM events)::int AS events`,
      )
    )[0];
  const missing = '00000000-0000-4000-8000-000000000000';
  const cases: [string, () => unknown[], RegExp][] = [
    ['an unknown ref', () => [job('a', ['nope'])], /jobs\[0\] \(a\) names unknown parent nope/],
    ['an unknown job id', () => [job('a'), job('b', [missing])], /jobs\[1\] \(b\) names unknown parent/],
    ['the job itself', () => [job('a', ['a'])], /jobs\[0\] \(a\) depends on itself/],
    ['a job of another run', () => [job('a', [other.jobs[0].id])], /jobs\[0\] \(a\) names job .* of another run/],
    ['a duplicate ref', () => [job('a'), job('a')], /jobs\[1\] \(a\) has ref a, already used by jobs\[0\]/],
    ['a cycle of two', () => [job('a', ['b']), job('b', ['a'])], /jobs\[[01]\] \([ab]\) is on a dependency cycle/],
    [
      'a cycle of three below a root',
      () => [job('root'), job('c', ['root', 'e']), job('d', ['c']), job('e', ['d']), job('f', ['e'])],
      /jobs\[[123]\] \([cde]\) is on a dependency cycle/,
    ],
    [
      'over 1,000 parents',
      () => [
        ...Array.from({ length: 1001 }, (_, i) => job(`p${i}`)),
        job(
          'many',
          Array.from({ length: 1001 }, (_, i) => `p${i}`),
        ),
      ],
      /jobs\[1001\] \(many\) has 1001 parents; at most 1000/,
    ],
    [
      'over 100,000 edges',
      () => [job('wide', [], { replicas: 400 }), ...Array.from({ length: 300 }, (_, i) => job(`c${i}`, ['wide']))],
      /jobs\[251\] \(c250\) brings the request's edges over 100,000/,
    ],
  ];

  it.each(cases)('on run submission: %s', async (_, jobs, message) => {
    const before = await counts();
    const res = await t.http.post(`/api/v1/projects/${project}/runs`).set(owner.auth).send({ jobs: jobs() });
    expect([res.status, res.body.code]).toEqual([400, 'DEPENDENCY_INVALID']);
    expect(res.body.message).toMatch(message);
    expect(res.body.details[0].field).toMatch(/^jobs\[\d+\]\.depends_on$/);
    expect(await counts()).toEqual(before);
  });

  it.each(cases.filter(([name]) => !name.startsWith('a job of another') && !name.startsWith('over 100')))(
    'on add-jobs: %s',
    async (_, jobs, message) => {
      const before = await counts();
      const res = await t.http
        .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0/jobs`)
        .set(owner.auth)
        .send({ jobs: jobs() });
      expect([res.status, res.body.code]).toEqual([400, 'DEPENDENCY_INVALID']);
      expect(res.body.message).toMatch(message);
      expect(await counts()).toEqual(before);
    },
  );

  it('on add-jobs: a job of another run', async () => {
    const res = await t.http
      .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [job('z', [other.jobs[0].id])] });
    expect([res.status, res.body.code]).toEqual([400, 'DEPENDENCY_INVALID']);
    expect(res.body.message).toMatch(/jobs\[0\] \(z\) names job .* of another run/);
  });

  it('accepts a parent by the id of a job of the same run, in any group', async () => {
    const res = await t.http
      .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [job('z', [run.jobs[0].id.toUpperCase()])] })
      .expect(201);
    expect(res.body.jobs[0].depends_on).toEqual([run.jobs[0].id]);
    expect(res.body.jobs[0].status).toBe('pending');
  });
});
