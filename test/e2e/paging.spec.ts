import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { expectFieldError } from '../support/input-errors';
import { giveHistory } from '../support/submission-histories';
import { createTestApp, TestApp, TestUser } from '../support/test-app';

interface PageOf<T> {
  items: T[];
  next_cursor: string | null;
}

/**
 * Keyset paging of a job's submission history (`GET .../jobs/{job_id}/submissions`, newest first) and of a group's
 * children (`GET .../job-groups/{g}/job-groups`, by group id): every item once, in order, across pages of any size,
 * while items are added between pages; a cursor that is not one of the list's is 400 naming `cursor`.
 */
describe('paging: submission history and child groups', () => {
  let t: TestApp;
  let owner: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp();
    owner = await t.user();
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

  const page = async <T>(url: string, query: Record<string, string | number>): Promise<PageOf<T>> => {
    const res = await t.http.get(url).query(query).set(owner.auth);
    if (res.status !== 200) throw new Error(`GET ${url} ${JSON.stringify(query)}: ${res.status} ${res.text}`);
    return res.body as PageOf<T>;
  };

  /** Every page of a list; `between` runs after each page that has a next one. */
  const walk = async <T>(url: string, limit: number, between?: (i: number) => Promise<void>) => {
    const items: T[] = [];
    const sizes: number[] = [];
    let cursor: string | null = null;
    for (let i = 0; i < 200; i++) {
      const p: PageOf<T> = await page<T>(url, cursor ? { limit, cursor } : { limit });
      items.push(...p.items);
      sizes.push(p.items.length);
      cursor = p.next_cursor;
      if (cursor === null) return { items, sizes };
      if (between) await between(i);
    }
    throw new Error('the walk never ended');
  };

  /** Page sizes of `n` items by pages of `limit`: full pages, then the rest (no empty last page). */
  const sizesOf = (n: number, limit: number) => [
    ...Array(Math.floor(n / limit)).fill(limit),
    ...(n % limit ? [n % limit] : []),
  ];

  describe('GET .../jobs/{job_id}/submissions', () => {
    const HISTORY = [0, 1, 2, 4, 5, 7, 8, 9, 10, 13, 14, 15, 16]; // 13 submissions, numbers with gaps
    let run: RunResponse;
    let jobId: string;
    let url: string;
    let idOf: Map<number, string>;
    beforeAll(async () => {
      run = await makeRun(t, owner, project, { jobs: [{ spec: jobSpec() }, { spec: jobSpec() }] });
      jobId = run.jobs[0].id;
      url = `/api/v1/projects/${project}/runs/${run.id}/jobs/${jobId}/submissions`;
      const written = await giveHistory(t, jobId, HISTORY);
      idOf = new Map(written.map((w) => [w.num, w.id]));
    });

    const newestFirst = [...HISTORY].reverse();

    it.each([1, 2, 3, 5, 12, 13, 100])('limit=%i: every submission once, newest first, across pages', async (limit) => {
      const { items, sizes } = await walk<{ id: string; submission_num: number }>(url, limit);
      expect(items.map((s) => s.submission_num)).toEqual(newestFirst);
      expect(items.map((s) => s.id)).toEqual(newestFirst.map((n) => idOf.get(n)));
      expect(sizes).toEqual(sizesOf(HISTORY.length, limit));
    });

    it('the default page is 20: the whole history of 13 in one page', async () => {
      const p = await page<{ submission_num: number }>(url, {});
      expect(p.items.map((s) => s.submission_num)).toEqual(newestFirst);
      expect(p.next_cursor).toBeNull();
    });

    it('only the job’s own history (its neighbour keeps its one submission)', async () => {
      const other = `/api/v1/projects/${project}/runs/${run.id}/jobs/${run.jobs[1].id}/submissions`;
      const p = await page<{ id: string }>(other, { limit: 100 });
      expect(p).toEqual({
        items: [expect.objectContaining({ id: run.jobs[1].latest_job_submission?.id })],
        next_cursor: null,
      });
    });

    it('a retry added between pages is not shown on later pages, and nothing is skipped or repeated', async () => {
      const mine = await makeRun(t, owner, project);
      const job = mine.jobs[0].id;
      await giveHistory(t, job, [0, 1, 2, 3, 4, 5]);
      const added: number[] = [];
      const { items } = await walk<{ submission_num: number }>(
        `/api/v1/projects/${project}/runs/${mine.id}/jobs/${job}/submissions`,
        2,
        async (i) => {
          const num = 6 + i;
          added.push(num);
          await giveHistory(t, job, [0, 1, 2, 3, 4, 5, ...added]);
        },
      );
      expect(added).toEqual([6, 7]);
      expect(items.map((s) => s.submission_num)).toEqual([5, 4, 3, 2, 1, 0]);
    });

    it.each<[string, string]>([
      ['not base64 JSON', 'garbage'],
      ['an object', b64({ before: 3 })],
      ['a string key', b64(['3'])],
      ['two keys', b64([3, 1])],
      ['a fraction', b64([1.5])],
      ['a key beyond int4', b64([2 ** 31])],
      ["the runs list's cursor", b64(['2024-01-01T00:00:00.000Z', '00000000-0000-0000-0000-000000000000'])],
    ])('a bad cursor (%s): 400 INVALID_CURSOR naming cursor', async (_label, cursor) => {
      expectFieldError(await t.http.get(url).query({ cursor }).set(owner.auth), 400, 'INVALID_CURSOR', 'cursor');
    });
  });

  describe('GET .../job-groups/{g}/job-groups', () => {
    let run: RunResponse;
    const base = () => `/api/v1/projects/${project}/runs/${run.id}/job-groups`;
    const childrenUrl = (g: number) => `${base()}/${g}/job-groups`;
    const addGroup = async (parent: number): Promise<number> =>
      (await t.http.post(base()).set(owner.auth).send({ parent_id: parent }).expect(201)).body.job_group_id;
    /** Children by parent, in creation order (created interleaved, so one parent's ids are not contiguous). */
    const children: Record<number, number[]> = { 0: [], 2: [], 5: [] };
    beforeAll(async () => {
      run = await makeRun(t, owner, project);
      for (const parent of [0, 0, 2, 0, 2, 0, 0, 2, 0, 5]) children[parent].push(await addGroup(parent));
      expect(children).toEqual({ 0: [1, 2, 4, 6, 7, 9], 2: [3, 5, 8], 5: [10] });
    });

    it.each([1, 2, 4, 5, 6, 100])(
      'limit=%i: the direct children of the root, each once, by group id, across pages',
      async (limit) => {
        const { items, sizes } = await walk<{ job_group_id: number; parent_id: number; depth: number }>(
          childrenUrl(0),
          limit,
        );
        expect(items.map((g) => g.job_group_id)).toEqual(children[0]);
        for (const g of items) expect(g).toMatchObject({ parent_id: 0, depth: 1 });
        expect(sizes).toEqual(sizesOf(children[0].length, limit));
      },
    );

    it('a group below the root: only its own children, at their depth; a leaf has none', async () => {
      const { items } = await walk<{ job_group_id: number; parent_id: number; depth: number }>(childrenUrl(2), 2);
      expect(items.map((g) => [g.job_group_id, g.parent_id, g.depth])).toEqual([
        [3, 2, 2],
        [5, 2, 2],
        [8, 2, 2],
      ]);
      expect((await walk<{ job_group_id: number }>(childrenUrl(5), 1)).items.map((g) => g.job_group_id)).toEqual([10]);
      expect(await page(childrenUrl(10), { limit: 5 })).toEqual({ items: [], next_cursor: null });
    });

    it('children added between pages come last, once; none is skipped or repeated', async () => {
      const mine = await makeRun(t, owner, project);
      const url = `/api/v1/projects/${project}/runs/${mine.id}/job-groups`;
      const add = async () =>
        (await t.http.post(url).set(owner.auth).send({ parent_id: 0 }).expect(201)).body.job_group_id as number;
      const before = [await add(), await add(), await add()];
      const added: number[] = [];
      const { items } = await walk<{ job_group_id: number }>(`${url}/0/job-groups`, 2, async () => {
        added.push(await add());
      });
      expect(added.length).toBeGreaterThan(0);
      expect(items.map((g) => g.job_group_id)).toEqual([...before, ...added]);
    });

    it.each<[string, string]>([
      ['not base64 JSON', 'garbage'],
      ['a string key', b64(['1'])],
      ['two keys', b64([1, 2])],
      ['a fraction', b64([0.5])],
      ['a key beyond int4', b64([2 ** 31])],
      ['null', b64(null)],
    ])('a bad cursor (%s): 400 INVALID_CURSOR naming cursor', async (_label, cursor) => {
      expectFieldError(
        await t.http.get(childrenUrl(0)).query({ cursor }).set(owner.auth),
        400,
        'INVALID_CURSOR',
        'cursor',
      );
    });
  });
});
