import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { makeProject, makeRun } from '../support/factories';
import { Query } from '../support/run-views';
import {
  ALL_RUNS,
  keysOf,
  list,
  makeRuns,
  projectRuns,
  setSubmittedAt,
  sortKeys,
  stopRun,
  walk,
} from '../support/runs-list';
import { required } from '../../src/common/required';

/*
 * The runs list's keyset pagination: newest first by (submitted_at, id), ties split across pages, no skips or
 * repeats while runs are inserted or deleted between pages.
 */
describe('runs list', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  describe('keyset pagination', () => {
    let owner: TestUser;
    let project: string;
    let keys: { id: string; at: string }[];

    // 9 runs; ties of 3 and 2 runs on the same millisecond, and two runs 1 ms apart.
    const TIMES = [
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.000Z',
      '2021-03-01T10:00:00.001Z',
      '2021-03-01T10:00:05.500Z',
      '2021-03-01T10:00:05.500Z',
      '2021-03-02T00:00:00.000Z',
      '2021-03-02T00:00:00.999Z',
      '2021-03-02T00:00:00.999Z',
    ];

    beforeAll(async () => {
      owner = await t.user();
      project = (await makeProject(t, owner)).name;
      const ids = await makeRuns(t, owner, project, TIMES.length);
      // assign times in a shuffled order so creation order does not line up with list order
      const order = [4, 0, 8, 2, 6, 1, 7, 3, 5];
      await setSubmittedAt(
        t,
        ids.map((id, i) => [id, TIMES[order[i]]]),
      );
      keys = await keysOf(t, ids);
    });

    it('stores the times exactly (millisecond precision) and has real ties', async () => {
      expect(keys.map((k) => k.at).sort()).toEqual([...TIMES].sort());
      expect(new Set(keys.map((k) => k.at)).size).toBe(5);
    });

    it('defaults to newest first by submitted_at then id; ascending=true is the exact reverse', async () => {
      const desc = await list(t, owner, projectRuns(project), { include_jobs: false });
      expect(desc.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
      expect(desc.items.map((r) => r.submitted_at)).toEqual([...TIMES].sort().reverse());
      expect(desc.next_cursor).toBeNull();
      const explicitDesc = await list(t, owner, projectRuns(project), { include_jobs: false, ascending: false });
      expect(explicitDesc.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
      const asc = await list(t, owner, projectRuns(project), { include_jobs: false, ascending: true });
      expect(asc.items.map((r) => r.id)).toEqual(sortKeys(keys, true));
      expect(asc.items.map((r) => r.id)).toEqual([...desc.items.map((r) => r.id)].reverse());
      // the same order through GET /runs (the owner sees only this project)
      const global = await list(t, owner, ALL_RUNS, { include_jobs: false });
      expect(global.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
    });

    it.each<[number, boolean]>([
      [1, false],
      [2, false],
      [3, false],
      [4, false],
      [1, true],
      [2, true],
      [3, true],
      [4, true],
    ])(
      'walks every page with limit=%i (ascending=%s): no skips, no repeats, ties split across pages',
      async (limit, ascending) => {
        for (const url of [projectRuns(project), ALL_RUNS]) {
          const { ids, sizes, pages } = await walk(t, owner, url, { limit, ascending, include_jobs: false });
          expect(ids).toEqual(sortKeys(keys, ascending));
          const full = Math.floor(keys.length / limit);
          const rest = keys.length % limit;
          expect(sizes).toEqual([...Array(full).fill(limit), ...(rest ? [rest] : [])]);
          expect(pages[pages.length - 1].next_cursor).toBeNull();
        }
      },
    );

    it('limit equal to the number of runs gives one page and next_cursor null; limit=100 too', async () => {
      for (const limit of [9, 100]) {
        const page = await list(t, owner, projectRuns(project), { limit, include_jobs: false });
        expect(page.items.map((r) => r.id)).toEqual(sortKeys(keys, false));
        expect(page.next_cursor).toBeNull();
      }
      const eight = await list(t, owner, projectRuns(project), { limit: 8, include_jobs: false });
      expect(eight.items).toHaveLength(8);
      expect(eight.next_cursor).not.toBeNull();
      const last = await list(t, owner, projectRuns(project), {
        limit: 8,
        include_jobs: false,
        cursor: required(eight.next_cursor, 'next_cursor'),
      });
      expect(last.items.map((r) => r.id)).toEqual([sortKeys(keys, false)[8]]);
      expect(last.next_cursor).toBeNull();
    });

    it('a cursor is stateless: the same cursor gives the same page again', async () => {
      const first = await list(t, owner, projectRuns(project), { limit: 2, include_jobs: false });
      const a = await list(t, owner, projectRuns(project), {
        limit: 2,
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      const b = await list(t, owner, projectRuns(project), {
        limit: 2,
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      expect(b).toEqual(a);
      expect(a.items.map((r) => r.id)).toEqual(sortKeys(keys, false).slice(2, 4));
    });

    it('runs inserted between pages cause no skips or repeats (descending: unseen; ascending: appended)', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const existing = await makeRuns(t, user, p, 7);
      await setSubmittedAt(t, [
        [existing[0], '2022-01-01T00:00:00.000Z'],
        [existing[1], '2022-01-01T00:00:00.000Z'],
        [existing[2], '2022-01-01T00:00:00.000Z'],
        [existing[3], '2022-01-02T00:00:00.000Z'],
        [existing[4], '2022-01-02T00:00:00.000Z'],
        [existing[5], '2022-01-03T00:00:00.000Z'],
        [existing[6], '2022-01-04T00:00:00.000Z'],
      ]);
      const existingKeys = await keysOf(t, existing);

      const insertedDuringDesc: string[] = [];
      const desc = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false }, async () => {
        insertedDuringDesc.push((await makeRun(t, user, p)).id);
        insertedDuringDesc.push((await makeRun(t, user, p)).id);
      });
      expect(insertedDuringDesc).toHaveLength(6); // 4 pages, 3 gaps between them
      expect(desc.ids).toEqual(sortKeys(existingKeys, false));

      const insertedDuringAsc: string[] = [];
      const asc = await walk(t, user, projectRuns(p), { limit: 2, ascending: true, include_jobs: false }, async () => {
        insertedDuringAsc.push((await makeRun(t, user, p)).id);
      });
      expect(insertedDuringAsc.length).toBeGreaterThan(0);
      const newKeys = await keysOf(t, [...insertedDuringDesc, ...insertedDuringAsc]);
      // every new run is newer than every existing one, so ascending it comes after them, each exactly once
      expect(asc.ids).toEqual([...sortKeys(existingKeys, true), ...sortKeys(newKeys, true)]);
      expect(new Set(asc.ids).size).toBe(asc.ids.length);

      // and a fresh walk afterwards sees everything once, newest first
      const after = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false });
      expect(after.ids).toEqual(sortKeys([...existingKeys, ...newKeys], false));
    });

    it('runs inserted concurrently with page fetches never cause skips or repeats of the existing runs', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const existing = await makeRuns(t, user, p, 8);
      await setSubmittedAt(
        t,
        existing.map((id, i) => [id, `2022-02-0${1 + Math.floor(i / 3)}T00:00:00.000Z`]),
      );
      const existingKeys = await keysOf(t, existing);
      const existingSet = new Set(existing);
      for (const ascending of [false, true]) {
        const seen: string[] = [];
        let cursor: string | undefined;
        for (let i = 0; i < 100; i++) {
          const query: Query = { limit: 2, ascending, include_jobs: false };
          if (cursor) query.cursor = cursor;
          const [page] = await Promise.all([
            list(t, user, projectRuns(p), query),
            makeRun(t, user, p),
            makeRun(t, user, p),
          ]);
          seen.push(...page.items.map((r) => r.id));
          if (page.next_cursor === null) break;
          cursor = page.next_cursor;
          if (ascending && seen.filter((id) => !existingSet.has(id)).length > 6) break; // the tail keeps growing
        }
        expect(new Set(seen).size).toBe(seen.length);
        expect(seen.filter((id) => existingSet.has(id))).toEqual(sortKeys(existingKeys, ascending));
      }
    });

    it('a soft-deleted run, even the one a cursor points at, is skipped without disturbing the walk', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const ids = await makeRuns(t, user, p, 7);
      await setSubmittedAt(
        t,
        ids.map((id, i) => [id, `2022-03-01T00:00:0${Math.floor(i / 2)}.000Z`]),
      );
      const ordered = sortKeys(await keysOf(t, ids), false);
      const deleted: string[] = [];
      const { ids: seen } = await walk(t, user, projectRuns(p), { limit: 2, include_jobs: false }, async (i, page) => {
        if (i !== 0) return;
        // delete the run the cursor was made from and the first run of the next page
        const cursorRun = page.items[1].id;
        const nextFirst = ordered[2];
        for (const id of [cursorRun, nextFirst]) {
          await stopRun(t, user, p, id);
          await t.http
            .delete(`${projectRuns(p)}/${id}`)
            .set(user.auth)
            .expect(204);
          deleted.push(id);
        }
      });
      expect(deleted).toEqual([ordered[1], ordered[2]]);
      expect(seen).toEqual([ordered[0], ordered[1], ...ordered.slice(3)]);
    });

    it('default limit is 20', async () => {
      const user = await t.user();
      const p = (await makeProject(t, user)).name;
      const ids = await makeRuns(t, user, p, 21);
      const order = sortKeys(await keysOf(t, ids), false);
      const first = await list(t, user, projectRuns(p), { include_jobs: false });
      expect(first.items.map((r) => r.id)).toEqual(order.slice(0, 20));
      expect(first.next_cursor).not.toBeNull();
      const second = await list(t, user, projectRuns(p), {
        include_jobs: false,
        cursor: required(first.next_cursor, 'next_cursor'),
      });
      expect(second.items.map((r) => r.id)).toEqual(order.slice(20));
      expect(second.next_cursor).toBeNull();
    });
  });
});
