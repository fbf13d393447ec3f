import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { makeProject, setMembers } from '../support/factories';
import { Query } from '../support/run-views';
import { ALL_RUNS, keysOf, list, makeRuns, projectRuns, sortKeys, walk } from '../support/runs-list';

/*
 * Which runs the runs list shows to whom: members, outsiders, global admins, service accounts.
 */
describe('runs list', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('visibility', () => {
    let u1: TestUser;
    let u2: TestUser;
    let u3: TestUser;
    let p1: string;
    let p2: string;
    let p3: string;
    let runs1: string[];
    let runs2: string[];
    let runs3: string[];

    beforeAll(async () => {
      u1 = await t.user();
      u2 = await t.user();
      u3 = await t.user();
      p1 = (await makeProject(t, u1)).name;
      p2 = (await makeProject(t, u2)).name;
      p3 = (await makeProject(t, u3)).name;
      await setMembers(t, u2, p2, [
        { user: u2.name, role: 'admin' },
        { user: u1.name, role: 'user' },
      ]);
      runs1 = await makeRuns(t, u1, p1, 2);
      runs2 = [...(await makeRuns(t, u2, p2, 2)), ...(await makeRuns(t, u1, p2, 1))];
      runs3 = await makeRuns(t, u3, p3, 3);
    });

    it('a normal user sees exactly the runs of the projects they are a member of', async () => {
      const all = await walk(t, u1, ALL_RUNS, { limit: 2, include_jobs: false });
      expect(all.ids).toEqual(sortKeys(await keysOf(t, [...runs1, ...runs2]), false));
      for (const id of runs3) expect(all.ids).not.toContain(id);
      const projects = new Set(all.pages.flatMap((p) => p.items.map((x) => x.project)));
      expect([...projects].sort()).toEqual([p1, p2].sort());

      const u3all = await list(t, u3, ALL_RUNS, { limit: 100 });
      expect(u3all.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs3), false));
      expect(u3all.items.every((x) => x.project === p3 && x.user === u3.name)).toBe(true);
      // filtering by another project's user shows nothing of theirs
      expect((await list(t, u1, ALL_RUNS, { user: u3.name })).items).toEqual([]);
    });

    it("another project's runs never appear, even with jobs and filters", async () => {
      for (const query of [
        {},
        { only_active: true },
        { status: 'submitted' },
        { job_submissions_limit: 0 },
        { include_jobs: false },
        { ascending: true },
      ] as Query[]) {
        const page = await list(t, u3, ALL_RUNS, { limit: 100, ...query });
        expect(page.items.map((x) => x.id).sort()).toEqual([...runs3].sort());
      }
    });

    it('a user with no projects sees an empty list', async () => {
      const loner = await t.user();
      expect(await list(t, loner, ALL_RUNS)).toEqual({ items: [], next_cursor: null });
    });

    it('GET /projects/{other}/runs by a non-member is 403; an unknown project is 404', async () => {
      const res = await t.http.get(projectRuns(p3)).set(u1.auth).expect(403);
      expect(res.body.code).toBe('FORBIDDEN');
      expect(res.body.message).not.toContain(runs3[0]);
      await t.http.get(projectRuns(p1)).set(u3.auth).query({ limit: 5, status: 'submitted' }).expect(403);
      const missing = await t.http
        .get(projectRuns(uniqueName('no-such-project')))
        .set(u1.auth)
        .expect(404);
      expect(missing.body.code).toBe('NOT_FOUND');
      // the member's own view of that project works
      const own = await list(t, u1, projectRuns(p2), { include_jobs: false });
      expect(own.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs2), false));
    });

    it("losing membership removes the project's runs from GET /runs at once", async () => {
      const p = (await makeProject(t, u2)).name;
      await setMembers(t, u2, p, [
        { user: u2.name, role: 'admin' },
        { user: u3.name, role: 'user' },
      ]);
      const ids = await makeRuns(t, u2, p, 2);
      const before = await list(t, u3, ALL_RUNS, { limit: 100, include_jobs: false });
      expect(before.items.map((x) => x.id).sort()).toEqual([...runs3, ...ids].sort());
      await setMembers(t, u2, p, [{ user: u2.name, role: 'admin' }]);
      const after = await list(t, u3, ALL_RUNS, { limit: 100, include_jobs: false });
      expect(after.items.map((x) => x.id).sort()).toEqual([...runs3].sort());
      await t.http.get(projectRuns(p)).set(u3.auth).expect(403);
    });

    it("a global admin sees runs of all projects, and any project's list", async () => {
      const admin = await t.user('admin');
      for (const user of [u1, u2, u3]) {
        const page = await list(t, admin, ALL_RUNS, { user: user.name, limit: 100 });
        const own: { id: string }[] = await t.dataSource.query(
          'SELECT id FROM runs WHERE user_id = $1 AND NOT deleted',
          [user.id],
        );
        expect(own.length).toBeGreaterThanOrEqual(2);
        expect(page.items.map((x) => x.id)).toEqual(
          sortKeys(
            await keysOf(
              t,
              own.map((x) => x.id),
            ),
            false,
          ),
        );
        expect(page.items.every((x) => x.user === user.name)).toBe(true);
      }
      const u3page = await list(t, admin, ALL_RUNS, { user: u3.name, limit: 100 });
      expect(u3page.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, runs3), false));
      const u1runs = await list(t, admin, ALL_RUNS, { user: u1.name, limit: 100, include_jobs: false });
      expect(u1runs.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, [...runs1, runs2[2]]), false));
      expect(new Set(u1runs.items.map((x) => x.project))).toEqual(new Set([p1, p2]));
      // unfiltered, everything in the database (not deleted), all pages
      const everything = await walk(t, admin, ALL_RUNS, { limit: 100, include_jobs: false });
      const rows: { id: string; submitted_at: Date }[] = await t.dataSource.query(
        'SELECT id, submitted_at FROM runs WHERE NOT deleted',
      );
      expect(everything.ids).toEqual(
        sortKeys(
          rows.map((x) => ({ id: x.id, at: x.submitted_at.toISOString() })),
          false,
        ),
      );
      for (const id of [...runs1, ...runs2, ...runs3]) expect(everything.ids).toContain(id);
      // an admin who is a member of none of them still reads each project's list
      for (const [p, runIds] of [
        [p1, runs1],
        [p3, runs3],
      ] as const) {
        const page = await list(t, admin, projectRuns(p), { include_jobs: false });
        expect(page.items.map((x) => x.id)).toEqual(sortKeys(await keysOf(t, [...runIds]), false));
      }
    });

    it('needs a token (401) and a user or admin token (service accounts: 403)', async () => {
      const none = await t.http.get(ALL_RUNS).expect(401);
      expect(none.body.code).toBe('UNAUTHENTICATED');
      await t.http.get(projectRuns(p1)).expect(401);
      await t.http.get(ALL_RUNS).set({ Authorization: 'Bearer not-a-token' }).expect(401);
      const service = await t.user('service');
      const res = await t.http.get(ALL_RUNS).set(service.auth).expect(403);
      expect(res.body.code).toBe('FORBIDDEN');
      await t.http.get(projectRuns(p1)).set(service.auth).expect(403);
    });
  });
});
