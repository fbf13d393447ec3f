import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { makeProject, makeRun, setMembers } from '../support/factories';
import { Query } from '../support/run-views';
import {
  ALL_RUNS,
  keysOf,
  list,
  makeRuns,
  projectRuns,
  setRunStatus,
  sortKeys,
  stopRun,
  walk,
} from '../support/runs-list';

/*
 * The runs list's filters (status, only_active, user) and its refusals of bad input.
 */
describe('runs list', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('filters', () => {
    let owner: TestUser;
    let member: TestUser;
    let project: string;
    const r: Record<string, string> = {};
    let allDesc: string[];

    beforeAll(async () => {
      owner = await t.user();
      member = await t.user();
      project = (await makeProject(t, owner)).name;
      await setMembers(t, owner, project, [
        { user: owner.name, role: 'admin' },
        { user: member.name, role: 'user' },
      ]);
      r.submitted = (await makeRun(t, owner, project)).id;
      r.stopped = (await makeRun(t, owner, project)).id;
      await stopRun(t, owner, project, r.stopped);
      r.done = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.done, 'done', null, 'all_jobs_done');
      r.failed = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.failed, 'failed', null, 'job_failed');
      r.running = (await makeRun(t, owner, project)).id;
      await setRunStatus(t, r.running, 'running', 'retrying');
      r.pending = (await makeRun(t, member, project)).id;
      await setRunStatus(t, r.pending, 'pending', 'retrying');
      r.terminating = (await makeRun(t, owner, project)).id;
      await setRunStatus(t, r.terminating, 'terminating', 'stopping', 'stopped_by_user');
      allDesc = sortKeys(await keysOf(t, Object.values(r)), false);
    });

    const only = (...names: string[]) => allDesc.filter((id) => names.some((n) => r[n] === id));
    const ids = async (query: Query, url = projectRuns(project), user = owner) => {
      const page = await list(t, user, url, { limit: 100, include_jobs: false, ...query });
      expect(page.next_cursor).toBeNull();
      return page.items.map((x) => x.id);
    };

    it('no filter lists all seven runs with their stored status', async () => {
      const page = await list(t, owner, projectRuns(project), { include_jobs: false });
      expect(page.items.map((x) => x.id)).toEqual(allDesc);
      const statusOf = new Map(
        page.items.map((x) => [x.id, [x.status, x.status_message, x.termination_reason, x.user]]),
      );
      expect(statusOf.get(r.submitted)).toEqual(['submitted', null, null, owner.name]);
      expect(statusOf.get(r.stopped)).toEqual(['terminated', null, 'stopped_by_user', owner.name]);
      expect(statusOf.get(r.done)).toEqual(['done', null, 'all_jobs_done', member.name]);
      expect(statusOf.get(r.failed)).toEqual(['failed', null, 'job_failed', member.name]);
      expect(statusOf.get(r.running)).toEqual(['running', 'retrying', null, owner.name]);
      expect(statusOf.get(r.pending)).toEqual(['pending', 'retrying', null, member.name]);
      expect(statusOf.get(r.terminating)).toEqual(['terminating', 'stopping', 'stopped_by_user', owner.name]);
    });

    it.each<[string, string[]]>([
      ['terminated,done', ['stopped', 'done']],
      ['terminated, done', ['stopped', 'done']],
      ['done', ['done']],
      ['running', ['running']],
      ['pending,submitted', ['pending', 'submitted']],
      ['failed,terminating,pending', ['failed', 'terminating', 'pending']],
      ['provisioning', []],
      ['done,done', ['done']],
    ])('status=%s', async (status, expected) => {
      expect(await ids({ status })).toEqual(only(...expected));
      expect(await ids({ status }, ALL_RUNS)).toEqual(only(...expected));
    });

    it('an unknown status is 400 VALIDATION_FAILED naming status', async () => {
      for (const status of ['bogus', 'done,bogus', 'DONE', 'terminated;done']) {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          const res = await t.http.get(url).set(owner.auth).query({ status });
          expect({ status, code: res.status }).toEqual({ status, code: 400 });
          expect(res.body.code).toBe('VALIDATION_FAILED');
          expect(res.body.message).toMatch(/status/);
          expect(res.body.details.map((d: { field: string }) => d.field)).toContain('status');
        }
      }
    });

    it('only_active=true leaves out finished runs (terminated, done, failed); false filters nothing', async () => {
      expect(await ids({ only_active: true })).toEqual(only('submitted', 'running', 'pending', 'terminating'));
      expect(await ids({ only_active: true }, ALL_RUNS)).toEqual(
        only('submitted', 'running', 'pending', 'terminating'),
      );
      expect(await ids({ only_active: false })).toEqual(allDesc);
      expect(await ids({ only_active: true, status: 'done' })).toEqual([]);
      expect(await ids({ only_active: true, status: 'running,done,terminated' })).toEqual(only('running'));
    });

    it("user=<name> lists that user's runs only; an unknown user gives an empty list", async () => {
      expect(await ids({ user: member.name })).toEqual(only('done', 'failed', 'pending'));
      expect(await ids({ user: owner.name })).toEqual(only('submitted', 'stopped', 'running', 'terminating'));
      expect(await ids({ user: member.name }, ALL_RUNS, member)).toEqual(only('done', 'failed', 'pending'));
      expect(await ids({ user: member.name, status: 'done,submitted' })).toEqual(only('done'));
      expect(await ids({ user: owner.name, only_active: true })).toEqual(only('submitted', 'running', 'terminating'));
      const unknown = await list(t, owner, projectRuns(project), { user: uniqueName('nobody') });
      expect(unknown).toEqual({ items: [], next_cursor: null });
      const unknownAll = await list(t, owner, ALL_RUNS, { user: uniqueName('nobody') });
      expect(unknownAll).toEqual({ items: [], next_cursor: null });
      // a user who exists but has no runs here
      const stranger = await t.user();
      expect(await ids({ user: stranger.name })).toEqual([]);
    });

    it('filters paginate: walking status=terminated,done,failed with limit=1', async () => {
      const { ids: walked, sizes } = await walk(t, owner, projectRuns(project), {
        limit: 1,
        status: 'terminated,done,failed',
        include_jobs: false,
      });
      expect(walked).toEqual(only('stopped', 'done', 'failed'));
      expect(sizes).toEqual([1, 1, 1]);
      const asc = await walk(t, owner, projectRuns(project), {
        limit: 2,
        ascending: true,
        user: member.name,
        include_jobs: false,
      });
      expect(asc.ids).toEqual([...only('done', 'failed', 'pending')].reverse());
    });
  });

  describe('bad input', () => {
    let owner: TestUser;
    let project: string;
    beforeAll(async () => {
      owner = await t.user();
      project = (await makeProject(t, owner)).name;
      await makeRuns(t, owner, project, 2);
    });

    const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

    const BAD_QUERIES: [Query, string][] = [
      [{ limit: 0 }, 'limit'],
      [{ limit: 101 }, 'limit'],
      [{ limit: -1 }, 'limit'],
      [{ limit: 'abc' }, 'limit'],
      [{ limit: '1.5' }, 'limit'],
      [{ limit: '' }, 'limit'],
      [{ job_submissions_limit: 101 }, 'job_submissions_limit'],
      [{ job_submissions_limit: -1 }, 'job_submissions_limit'],
      [{ job_submissions_limit: 'abc' }, 'job_submissions_limit'],
      [{ job_submissions_limit: '2.5' }, 'job_submissions_limit'],
      [{ ascending: 'maybe' }, 'ascending'],
      [{ only_active: 'yes' }, 'only_active'],
      [{ include_jobs: 'nope' }, 'include_jobs'],
      [{ user: 'Not A Name' }, 'user'],
      [{ status: 'done,'.repeat(50) }, 'status'],
      [{ cursor: 'x'.repeat(1025) }, 'cursor'],
      [{ foo: 'bar' }, 'foo'],
      [{ job_submission_limit: 3 }, 'job_submission_limit'],
      [{ project: 'x' }, 'project'],
      [{ offset: 10 }, 'offset'],
    ];

    it.each(
      BAD_QUERIES.map(([query, field]): [string, Query, string] => [
        `${JSON.stringify(query).slice(0, 60)} (naming ${field})`,
        query,
        field,
      ]),
    )('%s is 400 VALIDATION_FAILED', async (_label, query, field) => {
      for (const url of [projectRuns(project), ALL_RUNS]) {
        const res = await t.http.get(url).set(owner.auth).query(query);
        expect({ url, query, status: res.status }).toEqual({ url, query, status: 400 });
        expect(res.body).toMatchObject({ status_code: 400, code: 'VALIDATION_FAILED' });
        expect(res.body.message).toContain(field);
        expect(res.body.details.map((d: { field: string }) => d.field)).toContain(field);
      }
    });

    it('repeated parameters are 400, not 500', async () => {
      for (const qs of [
        'limit=2&limit=3',
        'job_submissions_limit=1&job_submissions_limit=2',
        'status=done&status=failed',
        'ascending=true&ascending=false',
      ]) {
        const res = await t.http.get(`${projectRuns(project)}?${qs}`).set(owner.auth);
        expect({ qs, status: res.status }).toEqual({ qs, status: 400 });
        expect(res.body.code).toBe('VALIDATION_FAILED');
      }
    });

    it.each<[string, string]>([
      ['garbage', 'not base64 JSON'],
      ['!!!', 'not base64url'],
      [b64('{"a":1}'), 'an object'],
      [b64([1, 2]), 'numbers'],
      [b64(['2024-01-01T00:00:00.000Z']), 'one key'],
      [b64(['2024-01-01T00:00:00.000Z', '00000000-0000-0000-0000-000000000000', 'x']), 'three keys'],
      [b64(['not a date', '00000000-0000-0000-0000-000000000000']), 'not a date'],
      [b64(['2024-01-01T00:00:00.000Z', 'not-a-uuid']), 'not a uuid'],
      [b64(['1', '00000000-0000-0000-0000-000000000000']), 'a date only JavaScript parses'],
    ])('cursor=%s (%s) is 400 naming the cursor, never 500', async (cursor) => {
      for (const url of [projectRuns(project), ALL_RUNS]) {
        for (const ascending of [false, true]) {
          const res = await t.http.get(url).set(owner.auth).query({ cursor, ascending });
          expect({ cursor, url, status: res.status }).toEqual({ cursor, url, status: 400 });
          expect(['INVALID_CURSOR', 'VALIDATION_FAILED']).toContain(res.body.code);
          expect(res.body.message).toMatch(/cursor/);
          expect(JSON.stringify(res.body)).not.toMatch(/SELECT|WHERE|syntax|uuid:|timestamp/i);
        }
      }
    });

    it('accepts boundary values: limit 1 and 100, job_submissions_limit 0 and 100, true/false', async () => {
      for (const query of [
        { limit: 1 },
        { limit: 100 },
        { job_submissions_limit: 0 },
        { job_submissions_limit: 100 },
        { ascending: 'true', only_active: 'false', include_jobs: 'true' },
        { status: '' },
      ]) {
        const res = await t.http.get(projectRuns(project)).set(owner.auth).query(query);
        expect({ query, status: res.status }).toEqual({ query, status: 200 });
      }
    });
  });
});
