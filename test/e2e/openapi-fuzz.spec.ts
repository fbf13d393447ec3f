import fc from 'fast-check';
import { writeFileSync } from 'node:fs';
import type { Response } from 'supertest';
import { DONE } from '../../bench/reference-worker';
import { jobSpec, makeProject, makeRun } from '../support/factories';
import { Example, FuzzContext, FuzzRequest, invalidExamples, short } from '../support/openapi-fuzz';
import { OpenApiDocument, Operation, operationsOf, routeKey, SchemaValidator } from '../support/openapi-schema';
import { createTestApp, TestApp, TestUser, uniqueName } from '../support/test-app';
import { claimFor, makeWorker } from '../support/workers';
import { required } from '../../src/common/required';

/**
 * The OpenAPI document is the contract: for every documented route, a valid request gets a documented 2xx whose body
 * matches its schema, and FUZZ_RUNS generated invalid requests (wrong types, missing and unknown fields, out-of-range
 * numbers, huge and odd strings, odd path parameters, other projects' ids, bad tokens) get no 500, only documented
 * statuses, bodies matching the documented schema, and never a 2xx for what the document says is invalid.
 * FUZZ_RUNS (default 50) per route; FUZZ_SEED replays a run.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 50);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31);

describe('OpenAPI contract (fuzzed)', () => {
  let t: TestApp;
  let doc: OpenApiDocument;
  let validator: SchemaValidator;
  let f: Fixtures;

  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'openapi' });
    doc = (await t.http.get('/docs-json').expect(200)).body;
    validator = new SchemaValidator(doc);
    f = await buildFixtures(t);
  }, 120_000);
  afterAll(() => t.close());

  it('documents opaque bearer tokens and the error schemas', () => {
    expect(JSON.stringify(doc)).not.toContain('JWT');
    for (const status of [400, 401, 403, 404, 409, 429, 503])
      expect(doc.components.schemas[`Error${status}`]).toBeDefined();
  });

  it(
    `every route: the valid request, then ${RUNS} invalid ones, answered as documented`,
    async () => {
      const ops = operationsOf(doc);
      const requests = validRequests(f);
      expect(ops.map(routeKey).filter((k) => !requests[k])).toEqual([]); // a new route needs its valid request here
      expect(Object.keys(requests).filter((k) => !ops.some((op) => routeKey(op) === k))).toEqual([]);
      const ctx = (op: Operation): FuzzContext => ({
        validator,
        components: doc.components.schemas,
        wrongRoleTokens: wrongRoles(op, f),
        foreign: f.foreign,
        freePathParams: ['worker_id'],
      });
      const failures: string[] = [];
      const statuses = new Map<number, number>();
      let examples = 0;
      const record = (op: Operation, ex: Example, res: Response, valid: boolean) => {
        examples++;
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const problem = judge(op, ex, res, valid, validator);
        if (problem) failures.push(`${routeKey(op)} [${ex.label}] → ${res.status} ${short(res.body)}: ${problem}`);
      };
      // Valid requests first, in document order but with the submission's final report last (it ends the lease).
      const ordered = [...ops].sort(
        (a, b) => Number(a.path.endsWith('/complete')) - Number(b.path.endsWith('/complete')),
      );
      for (const op of ordered) {
        const request = requests[routeKey(op)]();
        const json = op.requestBody?.content['application/json'];
        const bodyProblem = json ? validator.check(json.schema, request.body) : null;
        if (bodyProblem)
          failures.push(`${routeKey(op)}: the valid request's body breaks the documented schema: ${bodyProblem}`);
        record(op, { label: 'valid', request, mustRefuse: false }, await send(t, op, request), true);
      }
      for (const [i, op] of ordered.entries()) {
        const base = requests[routeKey(op)]();
        for (const ex of fc.sample(invalidExamples(op, base, ctx(op)), { numRuns: RUNS, seed: SEED + i }))
          record(op, ex, await send(t, op, ex.request), false);
      }
      const seen = [...statuses]
        .sort(([a], [b]) => a - b)
        .map(([s, n]) => `${s}×${n}`)
        .join(' ');
      process.stdout.write(
        `openapi-fuzz: ${ops.length} routes, ${examples} requests (${ops.length} valid + ${examples - ops.length} ` +
          `invalid, ${RUNS} per route), statuses ${seen}, ${failures.length} failures, seed ${SEED}\n`,
      );
      if (failures.length && process.env.FUZZ_FAILURES_FILE)
        writeFileSync(process.env.FUZZ_FAILURES_FILE, failures.join('\n'));
      expect(failures).toEqual([]);
    },
    120_000 + RUNS * 3_000,
  );
});

/** What is wrong with an answer, if anything. */
function judge(op: Operation, ex: Example, res: Response, valid: boolean, validator: SchemaValidator): string | null {
  if (res.status >= 500 && res.status !== 503) return 'a server error';
  const documented = op.responses[String(res.status)];
  if (!documented) return `status ${res.status} is not documented (${Object.keys(op.responses).join(', ')})`;
  if (valid && (res.status < 200 || res.status > 299)) return 'the valid request was refused';
  if (ex.mustRefuse && res.status < 400) return 'accepted a request the document says is invalid';
  const schema = documented.content?.['application/json']?.schema;
  if (!schema) return res.text ? `a body where none is documented: ${short(res.text)}` : null;
  if (!/^application\/json/.test(String(res.headers['content-type'])))
    return `content type ${res.headers['content-type']}`;
  const mismatch = validator.check(schema, res.body);
  return mismatch ? `body does not match the documented schema: ${mismatch}` : null;
}

async function send(t: TestApp, op: Operation, r: FuzzRequest): Promise<Response> {
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => encodePathSegment(String(r.params[name])));
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(r.query))
    for (const one of Array.isArray(v) ? v : [v]) query.append(k, String(one));
  const url = query.size ? `${path}?${query}` : path;
  let req = t.http[op.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete'](url);
  if (r.auth !== null) req = req.set('Authorization', r.auth);
  for (const [k, v] of Object.entries(r.headers)) req = req.set(k, v);
  if (r.bytes !== undefined) req = req.set('Content-Type', 'application/octet-stream').send(r.bytes);
  else if (r.rawBody !== undefined) req = req.set('Content-Type', 'application/json').send(r.rawBody);
  else if (r.body !== undefined) req = req.set('Content-Type', 'application/json').send(JSON.stringify(r.body));
  return req.ok(() => true);
}

/** Lone surrogates can't be percent-encoded as UTF-8: they go as the raw (invalid) bytes, to probe decoding. */
function encodePathSegment(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return s.replace(/[\ud800-\udfff]/g, '%ED%A0%80').replace(/[^%\w-]/g, (c) => encodeURIComponent(c));
  }
}

interface Fixtures {
  admin: TestUser;
  owner: TestUser;
  service: TestUser;
  project: string;
  runId: string;
  jobId: string;
  groupId: number;
  cancellableGroupId: number;
  stoppableRunId: string;
  finishedRunId: string;
  submissionId: string;
  /** The run and job of the claimed submission (its logs). */
  claimedRunId: string;
  claimedJobId: string;
  workerId: string;
  revocableTokenId: string;
  foreign: Record<string, (string | number)[]>;
}

/**
 * An admin, a project owner, a service account; a run with nested groups and jobs; a claimed submission; a finished
 * run.
 */
async function buildFixtures(t: TestApp): Promise<Fixtures> {
  const [admin, owner, outsider, service] = await Promise.all([
    t.user('admin'),
    t.user('user'),
    t.user('user'),
    t.user('service'),
  ]);
  const project = (await makeProject(t, owner)).name;
  const worker = makeWorker(t, service, uniqueName('fuzz-worker'));
  // Claimed first, so nothing else is queued ahead of them.
  const claimedRun = await makeRun(t, owner, project, { priority: 1000, jobs: [{ spec: jobSpec() }] });
  const [claimed] = await claimFor(worker, claimedRun.id);
  const finishedRun = await makeRun(t, owner, project, { priority: 1000, jobs: [{ spec: jobSpec() }] });
  const [toFinish] = await claimFor(worker, finishedRun.id);
  await worker.execute(toFinish, DONE);
  const run = await makeRun(t, owner, project, {
    job_groups: [{ ref: 'a' }, { ref: 'b', parent_ref: 'a', cancel_after_n_failures: 2 }],
    jobs: [{ spec: jobSpec() }, { group_ref: 'b', replicas: 2, spec: jobSpec() }],
  });
  const groupId = required(
    run.jobs.find((j) => j.job_group_id !== 0),
    'a job outside group 0',
  ).job_group_id;
  const cancellable = await t.http
    .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups`)
    .set(owner.auth)
    .send({ parent_id: 0 })
    .expect(201);
  const stoppable = await makeRun(t, owner, project);
  const revocable = await t.http.post('/api/v1/users/me/tokens').set(owner.auth).expect(201);
  const foreignProject = (await makeProject(t, outsider)).name;
  const foreignRun = await makeRun(t, outsider, foreignProject, {
    job_groups: [{ ref: 'x' }],
    jobs: [{ group_ref: 'x', spec: jobSpec() }],
  });
  return {
    admin,
    owner,
    service,
    project,
    runId: run.id,
    jobId: run.jobs[0].id,
    groupId,
    cancellableGroupId: cancellable.body.job_group_id,
    stoppableRunId: stoppable.id,
    finishedRunId: finishedRun.id,
    submissionId: claimed.id,
    claimedRunId: claimedRun.id,
    claimedJobId: claimedRun.jobs[0].id,
    workerId: worker.workerId,
    revocableTokenId: revocable.body.id,
    foreign: {
      project: [foreignProject],
      runId: [foreignRun.id],
      jobId: [foreignRun.jobs[0].id],
      id: [required(foreignRun.jobs[0].latest_job_submission, 'the latest submission').id],
    },
  };
}

/** Tokens whose role may not call `op`. */
function wrongRoles(op: Operation, f: Fixtures): string[] {
  if (op.path.startsWith('/internal/')) return [f.owner.token, f.admin.token];
  if (op.path.startsWith('/admin/') || routeKey(op) === 'POST /api/v1/users') return [f.owner.token, f.service.token];
  return [f.service.token];
}

type Valid = () => FuzzRequest;

/** One valid request per documented route, over the fixtures. */
function validRequests(f: Fixtures): Record<string, Valid> {
  const as = (u: TestUser | null, rest: Partial<FuzzRequest> = {}): FuzzRequest => ({
    params: {},
    query: {},
    headers: {},
    auth: u ? `Bearer ${u.token}` : null,
    ...rest,
  });
  const run = { project: f.project, runId: f.runId };
  const group = { ...run, g: f.groupId };
  const spec = () => jobSpec({ env: { FOO: 'bar' }, max_duration_s: 60 });
  const today = new Date().toISOString().slice(0, 10);
  const sub = { id: f.submissionId };
  return {
    'GET /healthz': () => as(null),
    'GET /readyz': () => as(null),
    'GET /api/v1/schemas/run-file': () => as(null),
    'POST /api/v1/users': () => as(f.admin, { body: { name: uniqueName('fuzz'), global_role: 'user' } }),
    'GET /api/v1/users/me': () => as(f.owner),
    'POST /api/v1/users/me/tokens': () => as(f.owner),
    'GET /api/v1/users/me/tokens': () => as(f.owner, { query: { limit: '2' } }),
    'DELETE /api/v1/users/me/tokens/{tokenId}': () => as(f.owner, { params: { tokenId: f.revocableTokenId } }),
    'POST /api/v1/projects': () => as(f.owner, { body: { name: uniqueName('fuzz'), billing_limit_usd: 100 } }),
    'GET /api/v1/projects': () => as(f.owner, { query: { limit: '5' } }),
    'GET /api/v1/projects/{project}': () => as(f.owner, { params: { project: f.project } }),
    'PATCH /api/v1/projects/{project}': () =>
      as(f.owner, { params: { project: f.project }, body: { billing_limit_usd: 1000 } }),
    'PUT /api/v1/projects/{project}/members': () =>
      as(f.owner, { params: { project: f.project }, body: { members: [{ user: f.owner.name, role: 'admin' }] } }),
    // Every run of the fixtures, the finished one with its reported provisioning and runtime data, checked against the
    // schema.
    'GET /api/v1/runs': () =>
      as(f.owner, {
        query: {
          limit: '20',
          ascending: 'true',
          only_active: 'false',
          include_jobs: 'true',
          job_submissions_limit: '3',
        },
      }),
    'POST /api/v1/projects/{project}/runs': () =>
      as(f.owner, {
        params: { project: f.project },
        body: {
          run_name: uniqueName('fuzz'),
          attributes: { k: 'v' },
          retry: { on_events: ['error'], max_attempts: 2 },
          priority: -1,
          job_groups: [{ ref: 'g1', attributes: { a: 1 } }],
          jobs: [{ name: 'j', group_ref: 'g1', replicas: 1, always_run: false, spec: spec() }],
        },
      }),
    'GET /api/v1/projects/{project}/runs': () =>
      as(f.owner, { params: { project: f.project }, query: { user: f.owner.name, limit: '3' } }),
    'GET /api/v1/projects/{project}/runs/{runId}': () =>
      as(f.owner, { params: run, query: { job_submissions_limit: '1' } }),
    'DELETE /api/v1/projects/{project}/runs/{runId}': () =>
      as(f.owner, { params: { project: f.project, runId: f.finishedRunId } }),
    'POST /api/v1/projects/{project}/runs/{runId}/stop': () =>
      as(f.owner, { params: { project: f.project, runId: f.stoppableRunId }, body: { abort: false } }),
    'GET /api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/submissions': () =>
      as(f.owner, { params: { ...run, jobId: f.jobId }, query: { limit: '10' } }),
    'GET /api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/dependents': () =>
      as(f.owner, { params: { ...run, jobId: f.jobId }, query: { limit: '10' } }),
    'POST /api/v1/projects/{project}/runs/{runId}/job-groups': () =>
      as(f.owner, { params: run, body: { parent_id: f.groupId, attributes: { x: 1 }, cancel_after_n_failures: 3 } }),
    'POST /api/v1/projects/{project}/runs/{runId}/job-groups/{g}/jobs': () =>
      as(f.owner, { params: group, body: { jobs: [{ spec: spec(), replicas: 2 }] } }),
    'GET /api/v1/projects/{project}/runs/{runId}/job-groups/{g}/jobs': () =>
      as(f.owner, { params: group, query: { recursive: 'true', status: 'submitted', limit: '5' } }),
    'GET /api/v1/projects/{project}/runs/{runId}/job-groups/{g}': () => as(f.owner, { params: group }),
    'GET /api/v1/projects/{project}/runs/{runId}/job-groups/{g}/job-groups': () =>
      as(f.owner, { params: { ...run, g: 0 } }),
    'POST /api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cancel': () =>
      as(f.owner, { params: { ...run, g: f.cancellableGroupId }, body: { reason: 'enough' } }),
    'GET /api/v1/resources': () => as(f.owner),
    'POST /admin/v1/resources': () =>
      // A billed resource (one a requestable key maps to), at the rate it already has: other names are refused.
      as(f.admin, { body: { name: 'gpu', rate_usd_per_unit_hour: 1, unit: 'gpu-hour' } }),
    // Claims one queued submission (of the fixtures' runs), so a claimed submission's shape is checked too.
    'POST /internal/v1/submissions/claim': () =>
      as(f.service, {
        body: {
          worker_id: f.workerId,
          capacity: { cpu: 4, memory_mib: 8192, gpu: 0 },
          limit: 1,
          capabilities: { container_runtime: 'docker' },
        },
      }),
    'POST /internal/v1/workers/{worker_id}/heartbeat': () =>
      as(f.service, { params: { worker_id: f.workerId }, body: { submissions: [f.submissionId] } }),
    // A heartbeat of the held submission, batched (its lease renewed; nothing else changes).
    'POST /internal/v1/submissions/reports': () =>
      as(f.service, {
        body: { worker_id: f.workerId, reports: [{ submission_id: f.submissionId, kind: 'heartbeat' }] },
      }),
    'POST /internal/v1/submissions/{id}/running': () =>
      as(f.service, { params: sub, body: { worker_id: f.workerId, provisioning_data: { host: 'h' } } }),
    'POST /internal/v1/submissions/{id}/heartbeat': () =>
      as(f.service, { params: sub, body: { worker_id: f.workerId, runtime_data: { cpu_s: 1 } } }),
    'POST /internal/v1/submissions/{id}/complete': () =>
      as(f.service, {
        params: sub,
        body: {
          worker_id: f.workerId,
          status: 'done',
          termination_reason: 'done_by_runner',
          exit_status: 0,
          runtime_data: { exit_status: 0, wall_s: 1.5, cpu_s: 0.2, peak_memory_mib: 12 },
        },
      }),
    // A chunk of the claimed submission's output (its worker holds it until the final report, sent last).
    'POST /internal/v1/submissions/{id}/logs': () =>
      as(f.service, { params: sub, body: { worker_id: f.workerId, stream: 'stdout', offset: 0, data: 'hello\n' } }),
    // The next bytes of that stream, as the runplane worker sends them.
    'POST /internal/v1/submissions/{id}/logs/{stream}': () =>
      as(f.service, {
        params: { ...sub, stream: 'stdout' },
        query: { worker_id: f.workerId, offset: 6 },
        bytes: Buffer.from('world\n'),
      }),
    'GET /api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/logs': () =>
      as(f.owner, {
        params: { project: f.project, runId: f.claimedRunId, jobId: f.claimedJobId },
        query: { submission_num: '0', stream: 'stdout', limit: '10' },
      }),
    'GET /api/v1/projects/{project}/billing': () =>
      as(f.owner, { params: { project: f.project }, query: { from: today, to: today, group_by: 'user,day,resource' } }),
    'GET /api/v1/projects/{project}/runs/{runId}/cost': () => as(f.owner, { params: run }),
    // A page of the run's status and job events (the fixtures' lifecycle wrote them); the SSE form is not fuzzed.
    'GET /api/v1/projects/{project}/events': () =>
      as(f.owner, {
        params: { project: f.project },
        query: { run_id: f.runId, type: 'run.status,job.status', limit: '10' },
      }),
    'GET /api/v1/projects/{project}/runs/{runId}/job-groups/{g}/cost': () => as(f.owner, { params: group }),
    'POST /admin/v1/maintenance/cleanup': () => as(f.admin),
    'GET /admin/v1/invariants': () => as(f.admin),
  };
}
