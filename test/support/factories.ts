import type { TestApp, TestUser } from './test-app';
import { uniqueName } from './test-app';

/** A project owned (as project admin) by `owner`, created through the API. */
export async function makeProject(t: TestApp, owner: TestUser, overrides: Record<string, unknown> = {}): Promise<{ name: string; id: string }> {
  const res = await t.http.post('/api/v1/projects').set(owner.auth).send({ name: uniqueName('proj'), ...overrides }).expect(201);
  return { name: res.body.name, id: res.body.id };
}

export async function setMembers(t: TestApp, admin: TestUser, project: string, members: { user: string; role: string }[]): Promise<void> {
  await t.http.put(`/api/v1/projects/${project}/members`).set(admin.auth).send({ members }).expect(200);
}
