import { Claimed, DONE, Outcome, ReferenceWorker } from '../../bench/reference-worker';
import type { Principal } from '../../src/common/auth/principal';
import { DomainError } from '../../src/common/errors/domain-error';
import { ClaimsService } from '../../src/modules/lifecycle/claims.service';
import { WorkerReportsService } from '../../src/modules/lifecycle/worker-reports.service';
import { makeProject } from './factories';
import { createTestApp, type TestApp, type TestUser } from './test-app';
import type { OwnDatabase } from './test-databases';
import { invariants } from './workers';

/**
 * A reference worker that calls the worker lifecycle's service in-process (the same transactions as the HTTP
 * routes, without HTTP's cost): for the tests that finish thousands of jobs. Errors come back as their status.
 */
export function directWorker(t: Pick<TestApp, 'app'>, service: TestUser, workerId: string): ReferenceWorker {
  const reports = t.app.get(WorkerReportsService);
  const claims = t.app.get(ClaimsService);
  const principal: Principal = { userId: service.id, name: service.name, globalRole: 'service' };
  return new ReferenceWorker(async (path, body) => {
    const b = body as never;
    const [, , , , id, action] = path.split('/');
    try {
      if (path.endsWith('/claim')) return { status: 200, body: await claims.claim(principal, b) };
      if (action === 'running') return { status: 200, body: await reports.running(principal, id, b) };
      if (action === 'heartbeat') return { status: 200, body: await reports.heartbeat(principal, id, b) };
      if (action === 'complete') return { status: 200, body: await reports.complete(principal, id, b) };
    } catch (err) {
      if (err instanceof DomainError) return { status: err.status, body: { code: err.code, message: err.message } };
      throw err;
    }
    throw new Error(`no route for ${path}`);
  }, workerId);
}

/**
 * Claims and runs everything claimable, `parallel` submissions at a time, each to the outcome `outcome(job)` gives
 * (default done), until a claim comes back empty. Returns the claimed submissions in claim order.
 */
export async function drain(
  w: ReferenceWorker,
  outcome: (s: Claimed) => Outcome = () => DONE,
  parallel = 8,
): Promise<Claimed[]> {
  const all: Claimed[] = [];
  // A claim that ends queued work below a cancellation may hand out nothing and release new work: ask twice.
  for (let empty = 0; empty < 2;) {
    const got = await w.claim(50);
    empty = got.length === 0 ? empty + 1 : 0;
    all.push(...got);
    for (let i = 0; i < got.length; i += parallel) {
      const results = await Promise.all(got.slice(i, i + parallel).map((s) => w.execute(s, outcome(s))));
      for (const r of results) if (r.status !== 200) throw new Error(`report: ${r.status} ${JSON.stringify(r.body)}`);
    }
  }
  return all;
}

export interface JobRow {
  id: string;
  job_name: string;
  job_num: number;
  replica_num: number;
  job_group_id: number;
  status: string;
  termination_reason: string | null;
  n_pending_parents: number;
  always_run: boolean;
}

/** The run's jobs as stored, by job_num and replica_num. */
export function jobRows(t: Pick<TestApp, 'dataSource'>, runId: string): Promise<JobRow[]> {
  return t.dataSource.query(
    `SELECT id, job_name, job_num, replica_num, job_group_id, status, termination_reason, n_pending_parents, always_run
       FROM jobs WHERE run_id = $1 ORDER BY job_num, replica_num`,
    [runId],
  );
}

/** How many of the run's jobs are in each stored status (`status/reason` for finished ones with a reason). */
export async function statusCounts(t: Pick<TestApp, 'dataSource'>, runId: string): Promise<Record<string, number>> {
  const rows: { k: string; n: number }[] = await t.dataSource.query(
    `SELECT status || coalesce('/' || termination_reason, '') AS k, count(*)::int AS n FROM jobs WHERE run_id = $1
      GROUP BY 1`,
    [runId],
  );
  return Object.fromEntries(rows.map((r) => [r.k, r.n]));
}

/** Worker outcomes by job name: names listed fail, others succeed. */
export const failing =
  (names: string[], failure: Outcome) =>
  (s: Claimed): Outcome =>
    names.includes(s.job_name ?? '') ? failure : DONE;

export type { Claimed, Outcome };
export { DONE };

/**
 * Like drain, but each submission only reports running then its outcome (no heartbeat): for the tests that finish
 * ten thousand jobs. `parallel` reports in flight at once, so parents of one child finish concurrently.
 */
export async function drainFast(
  w: ReferenceWorker,
  parallel = 16,
  runId?: string,
  outcome: Outcome = DONE,
): Promise<Claimed[]> {
  const all: Claimed[] = [];
  for (;;) {
    const got = await w.claim(100);
    // Stops at the first claim without a job of `runId` (when given): what follows is other runs' work.
    if (got.length === 0 || (runId && !got.some((s) => s.run_id === runId))) return all;
    all.push(...got);
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < got.length) {
          const s = got[next++];
          const r = await w.running(s.id);
          const c = await w.complete(s.id, outcome);
          if (r.status !== 200 || c.status !== 200) throw new Error(`report: ${r.status} ${c.status}`);
        }
      }),
    );
  }
}

/** What a dependencies spec works with: its own app and database, an owner, a service user, an admin, a project. */
export interface DagTestbed {
  t: TestApp;
  owner: TestUser;
  service: TestUser;
  admin: TestUser;
  project: string;
}

/**
 * The dependencies specs' shared set-up, registered in the calling describe: an app on a database of its own
 * (`ownDatabase`), the users and project handed to `use` once made, zero invariant mismatches after every test, the
 * app closed at the end.
 */
export function dagTestbed(ownDatabase: OwnDatabase, use: (bed: DagTestbed) => void): void {
  let bed: DagTestbed | undefined;
  beforeAll(async () => {
    const t = await createTestApp({}, { ownDatabase });
    const owner = await t.user();
    bed = { t, owner, service: await t.user('service'), admin: await t.user('admin'), project: '' };
    bed.project = (await makeProject(t, owner)).name;
    use(bed);
  });
  afterEach(async () => {
    if (bed) expect((await invariants(bed.t, bed.admin)).mismatches).toEqual([]);
  });
  afterAll(() => bed?.t.close());
}
