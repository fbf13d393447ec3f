import type { TestApp, TestUser } from './test-app';
import { uniqueName } from './test-app';

/** A project owned (as project admin) by `owner`, created through the API. */
export async function makeProject(
  t: Pick<TestApp, 'http'>,
  owner: TestUser,
  overrides: Record<string, unknown> = {},
): Promise<{ name: string; id: string }> {
  const res = await t.http
    .post('/api/v1/projects')
    .set(owner.auth)
    .send({ name: uniqueName('proj'), ...overrides })
    .expect(201);
  return { name: res.body.name, id: res.body.id };
}

export async function setMembers(
  t: Pick<TestApp, 'http'>,
  admin: TestUser,
  project: string,
  members: { user: string; role: string }[],
): Promise<void> {
  await t.http.put(`/api/v1/projects/${project}/members`).set(admin.auth).send({ members }).expect(200);
}

export const jobSpec = (overrides: Record<string, unknown> = {}) => ({
  commands: ['python train.py'],
  image: 'python:3.12',
  resources: { cpu: 1, memory_mib: 1024 },
  ...overrides,
});

export type RunBody = Record<string, unknown> & { jobs?: unknown[] };

/** Submits a run through the API (one job by default) and returns its body. */
export async function makeRun(
  t: Pick<TestApp, 'http'>,
  user: TestUser,
  project: string,
  body: RunBody = {},
): Promise<RunResponse> {
  const res = await t.http
    .post(`/api/v1/projects/${project}/runs`)
    .set(user.auth)
    .send({ jobs: [{ spec: jobSpec() }], ...body });
  if (res.status !== 201) throw new Error(`run submission failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as RunResponse;
}

export interface RunResponse {
  id: string;
  run_name: string;
  status: string;
  status_message: string | null;
  termination_reason: string | null;
  jobs: JobResponse[];
  [k: string]: unknown;
}

export interface JobResponse {
  id: string;
  job_num: number;
  replica_num: number;
  job_group_id: number;
  status: string;
  termination_reason: string | null;
  cancelled_job_group_id: number | null;
  submission_count: number;
  latest_job_submission: { id: string; submission_num: number; status: string } | null;
  job_submissions: { id: string; submission_num: number; status: string }[];
}

/** A nested chain of groups below the root: returns their ids, top first. */
export async function makeGroupChain(
  t: Pick<TestApp, 'http'>,
  user: TestUser,
  project: string,
  runId: string,
  depth: number,
  parent = 0,
): Promise<number[]> {
  const ids: number[] = [];
  for (let i = 0; i < depth; i++) {
    const res = await t.http
      .post(`/api/v1/projects/${project}/runs/${runId}/job-groups`)
      .set(user.auth)
      .send({ parent_id: ids.length ? ids[ids.length - 1] : parent });
    if (res.status !== 201) throw new Error(`group creation failed: ${res.status} ${JSON.stringify(res.body)}`);
    ids.push(res.body.job_group_id);
  }
  return ids;
}
