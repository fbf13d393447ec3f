import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiTypes } from '../../scripts/openapi-types';
import { createRunplaneClient } from '../../src/client';
import { jobSpec } from '../support/factories';
import { createTestApp, TestApp, uniqueName } from '../support/test-app';
import { required } from '../../src/common/required';

const root = join(__dirname, '..', '..');

describe('OpenAPI document and typed client', () => {
  let t: TestApp;
  let url: string;
  beforeAll(async () => {
    t = await createTestApp();
    const server = (await t.app.listen(0, '127.0.0.1')) as Server;
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => t.close());

  it('the committed openapi.json is what the app serves (`npm run openapi` after a route or DTO change)', async () => {
    const served = (await t.http.get('/docs-json').expect(200)).body;
    const committed = JSON.parse(readFileSync(join(root, 'openapi.json'), 'utf8'));
    expect(served).toEqual(committed);
  });

  it('src/client/api-types.ts (committed) is generated from openapi.json', () => {
    const out = join(mkdtempSync(join(tmpdir(), 'runplane-openapi-')), 'api-types.ts');
    generateApiTypes(root, join(root, 'openapi.json'), out);
    expect(readFileSync(join(root, 'src', 'client', 'api-types.ts'), 'utf8')).toBe(readFileSync(out, 'utf8'));
  });

  it('the client imports nothing of the server (a CLI using it starts fast)', () => {
    const dir = join(root, 'src', 'client');
    for (const file of readdirSync(dir)) {
      const imports = [...readFileSync(join(dir, file), 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]);
      expect(imports.filter((i) => i !== 'openapi-fetch' && !/^\.\/[\w-]+$/.test(i))).toEqual([]);
    }
  });

  it('submits a run and reads it back through the typed client', async () => {
    const owner = await t.user();
    const api = createRunplaneClient(url, owner.token);
    const project = await api.POST('/api/v1/projects', { body: { name: uniqueName('client') } });
    expect(project.response.status).toBe(201);
    const name = required(project.data, 'the created project').name;

    const submitted = await api.POST('/api/v1/projects/{project}/runs', {
      params: { path: { project: name } },
      body: { run_name: 'typed', jobs: [{ replicas: 2, spec: jobSpec() }] },
    });
    expect(submitted.response.status).toBe(201);
    const run = required(submitted.data, 'the submitted run');
    expect(run.jobs.map((j) => j.replica_num)).toEqual([0, 1]);

    const read = await api.GET('/api/v1/projects/{project}/runs/{runId}', {
      params: { path: { project: name, runId: run.id }, query: { job_submissions_limit: 1 } },
    });
    expect(read.data).toMatchObject({
      id: run.id,
      run_name: 'typed',
      project: name,
      status: 'submitted',
      job_group_id: 0,
    });

    const page = await api.GET('/api/v1/projects/{project}/runs', {
      params: { path: { project: name }, query: { limit: 1, include_jobs: false } },
    });
    expect(page.data?.items.map((r) => r.id)).toEqual([run.id]);

    // Errors come back typed as the documented error shape.
    const missing = await api.GET('/api/v1/projects/{project}', { params: { path: { project: 'no-such-project' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({ status_code: 404, code: 'NOT_FOUND' });

    const anonymous = await createRunplaneClient(url).GET('/api/v1/users/me');
    expect(anonymous.error).toMatchObject({ status_code: 401, code: 'UNAUTHENTICATED' });
  });
});
