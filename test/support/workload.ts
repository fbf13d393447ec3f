import { Claimed, DONE, ERROR, NO_CAPACITY, Outcome } from '../../bench/reference-worker';
import { jobSpec, makeGroupChain, makeRun } from './factories';
import type { TestApp, TestUser } from './test-app';
import { invariants, makeBatchingWorker, makeWorker } from './workers';

/** A seeded PRNG, so a failing run can be replayed by its seed. */
export function prng(seed: number) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

export interface WorkloadActors {
  owner: TestUser;
  service: TestUser;
  admin: TestUser;
  project: string;
}

export interface WorkloadHooks {
  /** Makes a claimed submission's lease lapse now (an abandoned claim). */
  lapse(submissionId: string): Promise<void>;
  /** Runs the lapsed-lease and cancelled-sweep passes (`final`: the last, bigger ones). */
  passes(final: boolean): Promise<void>;
}

/**
 * The randomised concurrent workload (claims, completions of every outcome, retries, duplicate and stale reports,
 * lapsed leases, cancels at every depth, stops) against `t.http` (one app in process, or several instances behind a
 * round-robin client), then every check: zero invariant mismatches, no submission claimed twice, job_counts never
 * negative nor off while everything moves, and afterwards equal to the jobs list. Jest expectations throughout.
 */
export async function randomisedWorkload(
  t: Pick<TestApp, 'http'>,
  { owner, service, admin, project }: WorkloadActors,
  hooks: WorkloadHooks,
  /** Each worker runs what it claimed at once and sends the reports it has due together, as one batch. */
  { batched = false }: { batched?: boolean } = {},
): Promise<{ seed: number; claimed: number }> {
  const seed = Number(process.env.WORKLOAD_SEED ?? Date.now() % 100000);
  const rand = prng(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
  const runs: { id: string; groups: number[] }[] = [];
  for (let r = 0; r < 4; r++) {
    const run = await makeRun(t, owner, project, {
      retry: { on_events: ['no_capacity', 'interruption', 'error'], max_attempts: 3 },
      job_groups: [
        { ref: 'a' },
        { ref: 'b', parent_ref: 'a', cancel_after_n_failures: 3 },
        { ref: 'c', parent_ref: 'b' },
      ],
      // Dependencies across groups: a chain of entries (each replica waits for every replica of the entry before),
      // with an always_run entry in odd runs, so cancels, failures and retries meet pending work and cascades.
      jobs: [
        { ref: 'r', spec: jobSpec(), replicas: 4 },
        { ref: 'ea', depends_on: ['r'], group_ref: 'a', spec: jobSpec(), replicas: 4 },
        { ref: 'eb', depends_on: ['ea'], always_run: r % 2 === 1, group_ref: 'b', spec: jobSpec(), replicas: 4 },
        { depends_on: ['eb', 'r'], group_ref: 'c', spec: jobSpec(), replicas: 4 },
      ],
    });
    const deeper = await makeGroupChain(t, owner, project, run.id, 2, 3);
    await t.http
      .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${deeper[1]}/jobs`)
      .set(owner.auth)
      .send({ jobs: [{ spec: jobSpec(), replicas: 4 }] })
      .expect(201);
    runs.push({ id: run.id, groups: [0, 1, 2, 3, ...deeper] });
  }

  const claimedBy = new Map<string, string>();
  const doubleClaims: string[] = [];
  const unexpected: string[] = [];
  const outcomes: Outcome[] = [
    DONE,
    DONE,
    DONE,
    ERROR,
    NO_CAPACITY,
    { status: 'failed', termination_reason: 'instance_unreachable' },
    { status: 'aborted', termination_reason: 'aborted_by_user' },
  ];
  /** job_counts read while everything moves: never negative, always adding up to the run's jobs. */
  const countsSeen: string[] = [];
  const sampleCounts = async () => {
    const run = pick(runs);
    const res = await t.http.get(`/api/v1/projects/${project}/runs/${run.id}`).query({ jobs_limit: 0 }).set(owner.auth);
    const counts = Object.values(res.body.job_counts ?? {}) as number[];
    if (res.status !== 200 || counts.some((n) => n < 0) || counts.reduce((a, b) => a + b, 0) !== 20)
      countsSeen.push(`${res.status} ${JSON.stringify(res.body.job_counts)}`);
  };

  const worker = async (n: number) => {
    const w = (batched ? makeBatchingWorker : makeWorker)(t, service, `worker-${n}`);
    const stranger = (batched ? makeBatchingWorker : makeWorker)(t, service, 'stranger');
    const handle = async (s: Claimed) => {
      if (claimedBy.has(s.id)) doubleClaims.push(s.id);
      claimedBy.set(s.id, w.workerId);
      const roll = rand();
      if (roll < 0.1) {
        // abandon it: the lease lapses
        await hooks.lapse(s.id);
        return;
      }
      const outcome = pick(outcomes);
      const res = await w.execute(s, outcome);
      if (res.status !== 200 && res.status !== 409)
        unexpected.push(`complete ${res.status} ${JSON.stringify(res.body)}`);
      if (roll < 0.3) {
        const dup = await w.complete(
          s.id,
          res.cancelled ? { status: 'terminated', termination_reason: 'job_group_cancelled' } : outcome,
        );
        if (dup.status !== 200 && dup.status !== 409) unexpected.push(`duplicate ${dup.status}`);
      }
      if (roll > 0.9) {
        const stale = await stranger.complete(s.id, DONE);
        if (stale.status !== 409) unexpected.push(`stranger got ${stale.status}`);
      }
    };
    for (let round = 0; round < 40; round++) {
      const claimed = await w.claim(1 + Math.floor(rand() * 3));
      if (claimed.length === 0 && round > 5) break;
      if (batched) await Promise.all(claimed.map(handle));
      else for (const s of claimed) await handle(s);
    }
  };
  const chaos = async () => {
    for (let i = 0; i < 12; i++) {
      const run = pick(runs);
      const roll = rand();
      const res =
        roll < 0.15
          ? await t.http
              .post(`/api/v1/projects/${project}/runs/${run.id}/stop`)
              .set(owner.auth)
              .send({ abort: rand() < 0.5 })
          : await t.http
              .post(`/api/v1/projects/${project}/runs/${run.id}/job-groups/${pick(run.groups.slice(1))}/cancel`)
              .set(owner.auth)
              .send({});
      if (res.status !== 200) unexpected.push(`cancel ${res.status} ${JSON.stringify(res.body)}`);
      await hooks.passes(false);
      await sampleCounts();
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await Promise.all([worker(1), worker(2), worker(3), worker(4), chaos()]);
  await hooks.passes(true);

  expect({ seed, unexpected }).toEqual({ seed, unexpected: [] });
  expect({ seed, doubleClaims }).toEqual({ seed, doubleClaims: [] });
  expect(claimedBy.size).toBeGreaterThan(20);
  const report = await invariants(t, admin);
  expect({ seed, mismatches: report.mismatches }).toEqual({ seed, mismatches: [] });
  expect({ seed, countsSeen }).toEqual({ seed, countsSeen: [] });
  // Afterwards each run's job_counts are exactly its jobs' statuses as the jobs list shows them.
  for (const run of runs) {
    const tally: Record<string, number> = {};
    let cursor: string | null = null;
    do {
      const page: { body: { items: { status: string }[]; next_cursor: string | null } } = await t.http
        .get(`/api/v1/projects/${project}/runs/${run.id}/job-groups/0/jobs`)
        .query({ recursive: true, limit: 7, ...(cursor ? { cursor } : {}) })
        .set(owner.auth)
        .expect(200);
      for (const j of page.body.items) tally[j.status] = (tally[j.status] ?? 0) + 1;
      cursor = page.body.next_cursor;
    } while (cursor);
    const view = await t.http.get(`/api/v1/projects/${project}/runs/${run.id}`).set(owner.auth).expect(200);
    expect({ seed, run: run.id, counts: view.body.job_counts }).toEqual({ seed, run: run.id, counts: tally });
  }
  return { seed, claimed: claimedBy.size };
}
