import type { TestApp, TestUser } from './test-app';
import { makeRun, RunBody } from './factories';
import type { JobView, Page, Query } from './run-views';

export async function setSubmittedAt(t: TestApp, times: [runId: string, iso: string][]): Promise<void> {
  await t.dataSource.query(
    `UPDATE runs r SET submitted_at = v.at FROM unnest($1::uuid[], $2::timestamptz[]) AS v(id, at) WHERE r.id = v.id`,
    [times.map(([id]) => id), times.map(([, at]) => at)],
  );
}

export async function setRunStatus(
  t: TestApp,
  runId: string,
  status: string,
  statusMessage: string | null = null,
  reason: string | null = null,
): Promise<void> {
  await t.dataSource.query(
    `UPDATE runs SET status = $2::varchar, status_message = $3, termination_reason = $4,
            finished_at = CASE WHEN $2::varchar IN ('done', 'failed', 'terminated') THEN now() END
      WHERE id = $1`,
    [runId, status, statusMessage, reason],
  );
}

/** (submitted_at, id) of runs as stored, for computing the expected order independently of the endpoint. */
export async function keysOf(t: TestApp, runIds: string[]): Promise<{ id: string; at: string }[]> {
  const rows: { id: string; submitted_at: Date }[] = await t.dataSource.query(
    `SELECT id, submitted_at FROM runs WHERE id = ANY($1::uuid[])`,
    [runIds],
  );
  return rows.map((r) => ({ id: r.id, at: r.submitted_at.toISOString() }));
}

/** Newest first by submitted_at, then id (uuids order like their lowercase hex text in PostgreSQL). */
export function sortKeys(keys: { id: string; at: string }[], ascending: boolean): string[] {
  const sorted = [...keys].sort((a, b) => {
    const byTime = Date.parse(a.at) - Date.parse(b.at);
    if (byTime !== 0) return byTime;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  });
  return (ascending ? sorted : sorted.reverse()).map((k) => k.id);
}

export async function list(t: TestApp, user: TestUser, url: string, query: Query = {}): Promise<Page> {
  const res = await t.http.get(url).set(user.auth).query(query);
  if (res.status !== 200)
    throw new Error(`GET ${url} ${JSON.stringify(query)}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Page;
}

/** Walks every page; `between(i)` runs after page i whenever there is a next page. */
export async function walk(
  t: TestApp,
  user: TestUser,
  url: string,
  query: Query,
  between?: (pageIndex: number, page: Page) => Promise<void>,
): Promise<{ ids: string[]; sizes: number[]; pages: Page[] }> {
  const ids: string[] = [];
  const sizes: number[] = [];
  const pages: Page[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 2000; i++) {
    const page = await list(t, user, url, cursor ? { ...query, cursor } : query);
    pages.push(page);
    ids.push(...page.items.map((r) => r.id));
    sizes.push(page.items.length);
    if (page.next_cursor === null) return { ids, sizes, pages };
    expect(typeof page.next_cursor).toBe('string');
    cursor = page.next_cursor;
    if (between) await between(i, page);
  }
  throw new Error('the walk never ended');
}

export const projectRuns = (project: string) => `/api/v1/projects/${project}/runs`;
export const ALL_RUNS = '/api/v1/runs';
export const nums = (j: JobView) => j.job_submissions.map((s) => s.submission_num);

export async function makeRuns(
  t: TestApp,
  user: TestUser,
  project: string,
  n: number,
  body: RunBody = {},
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await makeRun(t, user, project, body)).id);
  return ids;
}

export async function stopRun(t: TestApp, user: TestUser, project: string, runId: string): Promise<void> {
  const res = await t.http
    .post(`${projectRuns(project)}/${runId}/stop`)
    .set(user.auth)
    .send({});
  if (res.status !== 200) throw new Error(`stop failed: ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body.status).toBe('terminated');
}
