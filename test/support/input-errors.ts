import type { TestApp } from './test-app';

interface ErrorResponse {
  status: number;
  body: unknown;
  headers: Record<string, string>;
}

/** The API's error shape with this status and code, naming `field` in its details (and, for 400s, its message). */
export function expectFieldError(res: ErrorResponse, status: number, code: string, field: string): void {
  const body = res.body as { message: string; details: { field: string }[] };
  expect({ status: res.status, body }).toEqual({
    status: status,
    body: {
      status_code: status,
      code,
      message: expect.any(String),
      details: expect.arrayContaining([expect.objectContaining({ field, message: expect.any(String) })]),
    },
  });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  if (status === 400) expect(body.message).toContain(field);
}

const TABLES = [
  'users',
  'api_tokens',
  'projects',
  'project_members',
  'runs',
  'job_groups',
  'job_group_self_and_ancestors',
  'job_group_counters',
  'job_groups_cancelled',
  'jobs',
  'job_submissions',
  'resources',
  'idempotency_keys',
];

/** Row counts of every table a request could write to, to show a refused request wrote nothing. */
export async function rowCounts(t: TestApp): Promise<Record<string, number>> {
  const [row] = await t.dataSource.query(
    `SELECT ${TABLES.map((name) => `(SELECT count(*) FROM ${name})::int AS ${name}`).join(', ')}`,
  );
  return row as Record<string, number>;
}
