import type { MigrationInterface, QueryRunner } from 'typeorm';
import { DONE } from '../../bench/reference-worker';
import type { Claimed, ReferenceWorker } from '../../bench/reference-worker';
import { jobSpec, makeProject, makeRun, RunResponse } from '../support/factories';
import { expectFieldError, rowCounts } from '../support/input-errors';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { claimFor, invariants, makeWorker } from '../support/workers';

interface Cost {
  total_usd: number;
  running_usd: number;
  breakdown: { resource: string; usage: number; unit: string; cost_usd: number }[];
}

/** Seeded rates: cpu 0.04 / core-hour, memory 0.005 / GiB-hour (CreateBillingTables), disk 0.0001 / GiB-hour. */
const CPU = 0.04;
const MEM = 0.005;
const DISK = 0.0001;
/** The test's own resource: scratch space requested in MiB, billed in GiB-hours. */
const SCRATCH = 0.002;

/**
 * What a later migration adding a billed resource would do: one requestable key. Its rate comes after, through
 * `POST /admin/v1/resources`; no code changes.
 */
class AddScratchResource implements MigrationInterface {
  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `INSERT INTO requestable_resources (spec_key, resource_name, unit, factor, scale, max_quantity)
       VALUES ('scratch_mib', 'scratch', 'GiB-hour', 0.0009765625, 0, 1048576)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DELETE FROM requestable_resources WHERE spec_key = 'scratch_mib'`);
  }
}

describe('billing quantities as data: requestable_resources maps spec keys to billed resources', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  let w: ReferenceWorker;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'resources' });
    // Before any request reads the table, as migrations run before an instance serves.
    const runner = t.dataSource.createQueryRunner();
    try {
      await new AddScratchResource().up(runner);
    } finally {
      await runner.release();
    }
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
    w = makeWorker(t, service, 'w-resources');
  });
  afterEach(async () => {
    const report = await invariants(t, admin);
    expect(report.mismatches).toEqual([]);
  });
  afterAll(() => t.close());

  const runs = (p = project) => `/api/v1/projects/${p}/runs`;
  const runUrl = (run: RunResponse, p = project) => `${runs(p)}/${run.id}`;
  const get = async <T>(url: string, query: Record<string, string> = {}): Promise<T> =>
    (await t.http.get(url).set(owner.auth).query(query).expect(200)).body as T;
  const item = (c: Cost, resource: string) => c.breakdown.find((b) => b.resource === resource);
  const rates = async () => (await get<{ items: { name: string }[] }>('/api/v1/resources')).items;
  /** Runs one claimed submission for `seconds` of billed time (its clock rewound), then completes it. */
  const execute = async (s: Claimed, seconds: number) => {
    expect((await w.running(s.id)).status).toBe(200);
    await t.dataSource.query(
      `UPDATE billing_attempts SET started_at = started_at - make_interval(secs => $2),
              rolled_up_to = rolled_up_to - make_interval(secs => $2) WHERE submission_id = $1`,
      [s.id, seconds],
    );
    expect((await w.heartbeat(s.id)).status).toBe(200);
    expect((await w.complete(s.id, DONE)).status).toBe(200);
  };
  const runOne = async (run: RunResponse, seconds: number) => {
    const [s] = await claimFor(w, run.id, 1);
    expect(s).toBeDefined();
    await execute(s, seconds);
    return s;
  };
  const pinned = (submissionId: string): Promise<{ name: string; unit: string; quantity: string }[]> =>
    t.dataSource.query(
      `SELECT r.name, r.unit, sr.quantity::text AS quantity
         FROM submission_resources sr JOIN resources r ON r.id = sr.resource_id
        WHERE sr.submission_id = $1 ORDER BY r.name`,
      [submissionId],
    );

  it('a resource added by a migration and a rate is requested, pinned, billed, rolled up and reported', async () => {
    expect((await rates()).map((r) => r.name)).not.toContain('scratch');
    const spec = jobSpec({ resources: { cpu: 1, memory_mib: 1024, scratch_mib: 2048 } });

    // No rate yet: nothing may run unbilled, so a quantity above 0 is refused (0 is nothing to bill).
    const before = await rowCounts(t);
    const refused = await t.http
      .post(runs())
      .set(owner.auth)
      .send({ jobs: [{ spec }] });
    expectFieldError(refused, 400, 'VALIDATION_FAILED', 'jobs[0].spec.resources.scratch_mib');
    expect(refused.body.details[0].message).toMatch(/no rate/);
    expect(await rowCounts(t)).toEqual(before);
    const free = await makeRun(t, owner, project, {
      jobs: [{ spec: jobSpec({ resources: { cpu: 1, memory_mib: 1024, scratch_mib: 0 } }) }],
    });
    const freeSub = await runOne(free, 60);
    expect((await pinned(freeSub.id)).map((p) => p.name)).toEqual(['cpu', 'memory']);

    // The rate: the unit comes from the requestable key.
    const rate = await t.http
      .post('/admin/v1/resources')
      .set(admin.auth)
      .send({ name: 'scratch', rate_usd_per_unit_hour: SCRATCH })
      .expect(201);
    expect(rate.body).toMatchObject({ name: 'scratch', unit: 'GiB-hour', version: 1 });
    expect(await rates()).toContainEqual(
      expect.objectContaining({ name: 'scratch', unit: 'GiB-hour', rate_usd_per_unit_hour: SCRATCH }),
    );

    // A run (in a project of its own, for the report) with the job in a group: claim → running → an hour → complete.
    const p = (await makeProject(t, owner)).name;
    const run = await makeRun(t, owner, p, { job_groups: [{ ref: 'g' }], jobs: [{ group_ref: 'g', spec }] });
    const s = await runOne(run, 3600);
    // 2048 MiB × 1/1024 = 2 GiB, exactly.
    expect(await pinned(s.id)).toEqual([
      { name: 'cpu', unit: 'core-hour', quantity: '1.0000000000' },
      { name: 'memory', unit: 'GiB-hour', quantity: '1.0000000000' },
      { name: 'scratch', unit: 'GiB-hour', quantity: '2.0000000000' },
    ]);

    const cost = await get<Cost>(`${runUrl(run, p)}/cost`);
    expect(item(cost, 'scratch')).toEqual({
      resource: 'scratch',
      unit: 'GiB-hour',
      usage: expect.closeTo(2, 2),
      cost_usd: expect.closeTo(2 * SCRATCH, 5),
    });
    expect(cost.total_usd).toBeCloseTo(CPU + MEM + 2 * SCRATCH, 4);
    expect(cost.running_usd).toBe(0);
    // The group holds the whole job; the root is the run.
    expect(await get<Cost>(`${runUrl(run, p)}/job-groups/1/cost`)).toEqual(cost);
    expect(await get<Cost>(`${runUrl(run, p)}/job-groups/0/cost`)).toEqual(cost);
    expect((await get<{ cost: unknown }>(runUrl(run, p))).cost).toEqual({
      total_usd: cost.total_usd,
      breakdown: cost.breakdown,
    });

    const today = new Date().toISOString().slice(0, 10);
    const report = await get<{ items: { resource: string; unit: string; usage: number; cost_usd: number }[] }>(
      `/api/v1/projects/${p}/billing`,
      { from: '2000-01-01', to: today, group_by: 'resource' },
    );
    expect(report.items.map((r) => r.resource)).toEqual(['cpu', 'memory', 'scratch']);
    expect(report.items.find((r) => r.resource === 'scratch')).toEqual({
      resource: 'scratch',
      unit: 'GiB-hour',
      usage: expect.closeTo(2, 2),
      cost_usd: expect.closeTo(2 * SCRATCH, 5),
    });
    const total = report.items.reduce((n, r) => n + r.cost_usd, 0);
    expect(total).toBeCloseTo(cost.total_usd, 8);
  });

  it('disk_gib (migration CreateRequestableResources) is billed as disk, per GiB-hour', async () => {
    expect(await rates()).toContainEqual(
      expect.objectContaining({ name: 'disk', unit: 'GiB-hour', rate_usd_per_unit_hour: DISK, version: 1 }),
    );
    const run = await makeRun(t, owner, project, {
      jobs: [{ spec: jobSpec({ resources: { cpu: 2, memory_mib: 512, gpu: 0, disk_gib: 100.5 } }) }],
    });
    const s = await runOne(run, 3600);
    expect(await pinned(s.id)).toEqual([
      { name: 'cpu', unit: 'core-hour', quantity: '2.0000000000' },
      { name: 'disk', unit: 'GiB-hour', quantity: '100.5000000000' },
      { name: 'memory', unit: 'GiB-hour', quantity: '0.5000000000' },
    ]);
    const cost = await get<Cost>(`${runUrl(run)}/cost`);
    expect(item(cost, 'disk')).toEqual({
      resource: 'disk',
      unit: 'GiB-hour',
      usage: expect.closeTo(100.5, 1),
      cost_usd: expect.closeTo(100.5 * DISK, 5),
    });
    expect(item(cost, 'gpu')).toBeUndefined();
    expect(cost.total_usd).toBeCloseTo(2 * CPU + 0.5 * MEM + 100.5 * DISK, 4);
  });

  it('resources take exactly the table’s keys, each within its bounds and decimals: 400 naming the key', async () => {
    const run = await makeRun(t, owner, project);
    const ok = { cpu: 1, memory_mib: 1 };
    const cases: [unknown, string][] = [
      [{ ...ok, tape_gib: 1 }, 'tape_gib'],
      [{ cpu: 1 }, 'memory_mib'],
      [{ memory_mib: 1 }, 'cpu'],
      [{ ...ok, cpu: 0 }, 'cpu'],
      [{ ...ok, cpu: 1.0005 }, 'cpu'],
      [{ ...ok, memory_mib: 1.5 }, 'memory_mib'],
      [{ ...ok, gpu: 1.5 }, 'gpu'],
      [{ ...ok, gpu: 65 }, 'gpu'],
      [{ ...ok, disk_gib: 0.0005 }, 'disk_gib'],
      [{ ...ok, disk_gib: -1 }, 'disk_gib'],
      [{ ...ok, disk_gib: 1048577 }, 'disk_gib'],
      [{ ...ok, disk_gib: '10' }, 'disk_gib'],
      [{ ...ok, disk_gib: null }, 'disk_gib'],
      [{ ...ok, scratch_mib: 0.5 }, 'scratch_mib'],
    ];
    const before = await rowCounts(t);
    for (const [resources, key] of cases) {
      const body = { jobs: [{ spec: jobSpec() }, { spec: jobSpec({ resources }) }] };
      const field = `jobs[1].spec.resources.${key}`;
      expectFieldError(await t.http.post(runs()).set(owner.auth).send(body), 400, 'VALIDATION_FAILED', field);
      const added = await t.http
        .post(`${runUrl(run)}/job-groups/0/jobs`)
        .set(owner.auth)
        .send(body);
      expectFieldError(added, 400, 'VALIDATION_FAILED', field);
    }
    const unknown = await t.http
      .post(runs())
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec({ resources: { ...ok, tape_gib: 1 } }) }] });
    expect(unknown.body.details).toEqual([
      {
        field: 'jobs[0].spec.resources.tape_gib',
        message: 'should not exist (requestable: cpu, disk_gib, gpu, memory_mib, scratch_mib)',
      },
    ]);
    expect(await rowCounts(t)).toEqual(before);

    const edges = { cpu: 1024, memory_mib: 16777216, gpu: 64, disk_gib: 1048576, scratch_mib: 0 };
    await t.http
      .post(`${runUrl(run)}/job-groups/0/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec({ resources: edges }) }, { spec: jobSpec({ resources: { ...ok, gpu: 0 } }) }] })
      .expect(201);
    // Queued, never claimed by this file's small workers: finished out of the way for later tests.
    await t.http
      .post(`${runUrl(run)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
  });

  it('a key or a rate another instance added while this one serves is honoured within about a second', async () => {
    const withFpga = (n: number) => ({ jobs: [{ spec: jobSpec({ resources: { cpu: 1, memory_mib: 1, fpga: n } }) }] });
    await makeRun(t, owner, project); // this instance now holds a fresh copy of the table
    await t.dataSource.query(
      `INSERT INTO requestable_resources (spec_key, resource_name, unit, factor, scale, max_quantity)
       VALUES ('fpga', 'fpga', 'fpga-hour', 1, 0, 8)`,
    );
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await t.http.post(runs()).set(owner.auth).send(withFpga(0)).expect(201);
    // The rate as another instance's POST /admin/v1/resources writes it (this instance's copy is not dropped).
    await t.dataSource.query(
      `INSERT INTO resources (name, unit, rate_usd_per_unit_hour, version) VALUES ('fpga', 'fpga-hour', 2, 1)`,
    );
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const run = await makeRun(t, owner, project, { priority: 900, ...withFpga(2) });
    const s = await runOne(run, 1800);
    expect(item(await get<Cost>(`${runUrl(run)}/cost`), 'fpga')).toEqual({
      resource: 'fpga',
      unit: 'fpga-hour',
      usage: expect.closeTo(1, 2),
      cost_usd: expect.closeTo(2, 2),
    });
    expect((await pinned(s.id)).find((r) => r.name === 'fpga')).toEqual({
      name: 'fpga',
      unit: 'fpga-hour',
      quantity: '2.0000000000',
    });
  });
});
