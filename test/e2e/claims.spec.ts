import { jobSpec, makeProject, makeRun } from '../support/factories';
import { createTestApp, embeddedOnly, TestApp, TestUser, uniqueName } from '../support/test-app';

const itOnPostgres = embeddedOnly ? it.skip : it;

interface Capacity {
  cpu: number;
  memory_mib: number;
  gpu?: number;
}

interface ClaimedView {
  id: string;
  run_id: string;
}

/**
 * What a claim hands out: only queued submissions that fit the declared capacity, packed into it together (a big
 * one skipped for smaller ones after it), best first: higher run priority, then earlier submission; and concurrent
 * claimers lock only what they take, so none is left idle while fitting work waits. Its own database, so the queue
 * holds exactly what each test puts in it.
 */
describe('claim: capacity fitting and priority order', () => {
  let t: TestApp;
  let owner: TestUser;
  let service: TestUser;
  let project: string;
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'claims' });
    owner = await t.user();
    service = await t.user('service');
    project = (await makeProject(t, owner)).name;
  });
  afterAll(() => t.close());

  const queued = async (): Promise<number> =>
    (await t.dataSource.query(`SELECT count(*)::int AS n FROM job_submissions WHERE status = 'submitted'`))[0].n;
  // Every test starts with an empty queue and leaves one (what it does not claim, it drains).
  beforeEach(async () => expect(await queued()).toBe(0));
  afterEach(async () => {
    await claim({ cpu: 100_000, memory_mib: 1_000_000_000, gpu: 1024 }, 100);
    expect(await queued()).toBe(0);
  });

  const claim = async (capacity: Capacity, limit: number): Promise<ClaimedView[]> => {
    const res = await t.http
      .post('/internal/v1/submissions/claim')
      .set(service.auth)
      // The factory's job spec names an image: only a claimer with a container runtime gets it.
      .send({ worker_id: uniqueName('w'), capacity, limit, capabilities: { container_runtime: 'docker' } });
    expect(res.status).toBe(200);
    return res.body.submissions;
  };
  /** A run of one job asking for `resources`, at `priority`; returns its id. */
  const runOf = async (resources: Capacity, priority = 0): Promise<string> =>
    (await makeRun(t, owner, project, { priority, jobs: [{ spec: jobSpec({ resources }) }] })).id;
  const big = { cpu: 64, memory_mib: 100_000 };
  const runsOf = (claimed: ClaimedView[]) => claimed.map((c) => c.run_id).sort();
  const statusOf = async (runId: string): Promise<string> =>
    (await t.dataSource.query(`SELECT status FROM job_submissions WHERE run_id = $1`, [runId]))[0].status;

  it('hands out only submissions that fit the capacity in cpu, memory_mib and gpu', async () => {
    const tooManyCpus = await runOf({ cpu: 8, memory_mib: 1024 }, 3);
    const tooMuchMemory = await runOf({ cpu: 1, memory_mib: 65_536 }, 2);
    const needsAGpu = await runOf({ cpu: 1, memory_mib: 1024, gpu: 1 }, 1);
    const fits = await runOf({ cpu: 4, memory_mib: 8192 }, 0);
    const small = { cpu: 4, memory_mib: 8192, gpu: 0 };
    expect(runsOf(await claim(small, 10))).toEqual([fits]);
    expect(await claim(small, 10)).toEqual([]);
    for (const id of [tooManyCpus, tooMuchMemory, needsAGpu]) expect(await statusOf(id)).toBe('submitted');
    // gpu omitted from the capacity means none.
    expect(await claim({ cpu: 8, memory_mib: 65_536 }, 1)).toHaveLength(1);
    expect(await statusOf(tooManyCpus)).toBe('provisioning');
    expect(runsOf(await claim({ cpu: 8, memory_mib: 65_536 }, 10))).toEqual([tooMuchMemory]);
    expect(runsOf(await claim({ cpu: 1, memory_mib: 1024, gpu: 1 }, 10))).toEqual([needsAGpu]);
  });

  it('packs several submissions into the capacity, all of them together within it, up to the limit', async () => {
    const runs: string[] = [];
    for (let p = 6; p >= 1; p--) runs.push(await runOf({ cpu: 1, memory_mib: 1024 }, p));
    // cpu binds: three of 1 core in 3 cores, best first.
    expect(runsOf(await claim({ cpu: 3, memory_mib: 100_000 }, 10))).toEqual(runs.slice(0, 3).sort());
    // memory binds: one of 1 GiB in 1.5 GiB.
    expect(runsOf(await claim({ cpu: 100, memory_mib: 1536 }, 10))).toEqual([runs[3]]);
    // the limit binds.
    expect(runsOf(await claim({ cpu: 100, memory_mib: 100_000 }, 1))).toEqual([runs[4]]);
    expect(runsOf(await claim({ cpu: 100, memory_mib: 100_000 }, 10))).toEqual([runs[5]]);
  });

  it.each<[string, Capacity, Capacity[]]>([
    ['cpu', { cpu: 4, memory_mib: 100_000 }, [3, 2, 1].map((cpu) => ({ cpu, memory_mib: 1 }))],
    ['memory_mib', { cpu: 100, memory_mib: 4096 }, [3072, 2048, 1024].map((memory_mib) => ({ cpu: 1, memory_mib }))],
    ['gpu', { cpu: 100, memory_mib: 100_000, gpu: 4 }, [3, 2, 1].map((gpu) => ({ cpu: 1, memory_mib: 1, gpu }))],
  ])('skips a submission too big for what is left (%s) and takes smaller ones after it', async (_r, cap, sizes) => {
    // Best first: 3 units, then 2, then 1, in a capacity of 4: 3 fits, 2 no longer does, 1 does.
    const [big, middle, smallest] = [await runOf(sizes[0], 3), await runOf(sizes[1], 2), await runOf(sizes[2], 1)];
    expect(runsOf(await claim(cap, 10))).toEqual([big, smallest].sort());
    expect(await statusOf(middle)).toBe('submitted');
    expect(runsOf(await claim(cap, 10))).toEqual([middle]);
  });

  // Packing by subtracting float cpus left 0.3 − 0.1 − 0.1 = 0.0999…, and the third 0.1 no longer fit; the claim
  // counts thousandths of a core (the column's scale).
  it('packs fractional cpus exactly: three submissions of 0.1 core fill a capacity of 0.3', async () => {
    const runs: string[] = [];
    for (let i = 0; i < 3; i++) runs.push(await runOf({ cpu: 0.1, memory_mib: 1 }));
    expect(runsOf(await claim({ cpu: 0.3, memory_mib: 100_000 }, 10))).toEqual([...runs].sort());
  });

  it('hands out the highest run priority first, then the earliest submitted', async () => {
    const spec = { cpu: 1, memory_mib: 1024 };
    const r1 = await runOf(spec, 0);
    const r2 = await runOf(spec, 10);
    const r3 = await runOf(spec, 0);
    const r4 = await runOf(spec, -5);
    const r5 = await runOf(spec, 10);
    const order: string[] = [];
    for (let i = 0; i < 5; i++) order.push(...runsOf(await claim({ cpu: 64, memory_mib: 100_000 }, 1)));
    expect(order).toEqual([r2, r5, r1, r3, r4]);
  });

  it('a claim of several takes the best ones, and every job of a higher-priority run comes first', async () => {
    const early = (await makeRun(t, owner, project, { priority: 1, jobs: [{ spec: jobSpec(), replicas: 3 }] })).id;
    const urgent = (await makeRun(t, owner, project, { priority: 50, jobs: [{ spec: jobSpec(), replicas: 3 }] })).id;
    const got = await claim({ cpu: 64, memory_mib: 100_000 }, 4);
    expect(got.map((c) => c.run_id).sort()).toEqual([early, urgent, urgent, urgent].sort());
    expect(runsOf(await claim({ cpu: 64, memory_mib: 100_000 }, 10))).toEqual([early, early]);
  });

  // Concurrent claimers need real sessions: the embedded database serialises them and would hide this.
  itOnPostgres(
    '4 concurrent claims of 3 over 12 queued submissions take 3 each, none twice, round after round',
    async () => {
      const perClaim: number[][] = [];
      for (let round = 0; round < 5; round++) {
        await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 12 }] });
        const got = await Promise.all([0, 1, 2, 3].map(() => claim(big, 3)));
        const ids = got.flat().map((c) => c.id);
        expect(new Set(ids).size).toBe(ids.length);
        perClaim.push(got.map((g) => g.length));
      }
      expect(perClaim).toEqual(Array.from({ length: 5 }, () => [3, 3, 3, 3]));
    },
  );

  itOnPostgres('8 concurrent claims of 5 over 40 queued submissions take 5 each: none comes back short', async () => {
    const perClaim: number[][] = [];
    for (let round = 0; round < 3; round++) {
      await makeRun(t, owner, project, { jobs: [{ spec: jobSpec(), replicas: 40 }] });
      const got = await Promise.all(Array.from({ length: 8 }, () => claim(big, 5)));
      const ids = got.flat().map((c) => c.id);
      expect(new Set(ids).size).toBe(ids.length);
      perClaim.push(got.map((g) => g.length));
    }
    expect(perClaim).toEqual(Array.from({ length: 3 }, () => Array.from({ length: 8 }, () => 5)));
  });

  itOnPostgres(
    'a packed submission another transaction holds is passed over and its capacity packed again',
    async () => {
      const wide = (
        await makeRun(t, owner, project, {
          priority: 9,
          jobs: [{ spec: jobSpec({ resources: { cpu: 2, memory_mib: 1 } }) }],
        })
      ).id;
      const narrow = (
        await makeRun(t, owner, project, {
          priority: 8,
          jobs: [{ spec: jobSpec({ resources: { cpu: 1, memory_mib: 1 } }), replicas: 2 }],
        })
      ).id;
      const holder = t.dataSource.createQueryRunner();
      await holder.connect();
      try {
        await holder.startTransaction();
        await holder.query(`SELECT id FROM job_submissions WHERE run_id = $1 FOR UPDATE`, [wide]);
        // The best candidate (2 cpus) fills the capacity but is held: the claim packs the two narrow ones instead.
        const got = await claim({ cpu: 2, memory_mib: 100 }, 2);
        expect(got.map((c) => c.run_id)).toEqual([narrow, narrow]);
      } finally {
        await holder.rollbackTransaction();
        await holder.release();
      }
      expect((await claim(big, 10)).map((c) => c.run_id)).toEqual([wide]);
    },
  );
});
