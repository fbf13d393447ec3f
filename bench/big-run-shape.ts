import { performance } from 'node:perf_hooks';
import { DONE, httpPost, type Post, ReferenceWorker } from './reference-worker';
import type { ServerUnderTest } from './server-under-test';
import { QUICK } from './support';

/**
 * The shape of the big-run bench (issue #19, "Big runs"): a run of depth-5 groups grown through add-jobs requests,
 * its twin 100 times smaller grown by the same requests scaled down, and what surrounds them (list-page fillers,
 * small runs to cancel, the claimers).
 */

/** Jobs of the big run's add-jobs requests (the submit adds one more in the root). */
export const BIG_JOBS = QUICK ? 5_000 : 1_000_000;
export const BATCH = QUICK ? 200 : 10_000;
export const REQUESTS = BIG_JOBS / BATCH;
/** The twin gets every request of the big run, scaled down this much. */
export const TWIN_SCALE = 100;
/** Levels of groups below the root, each group with two children: 2 + 4 + 8 + 16 + 32 = 62 groups. */
const DEPTH = 5;
/** Runs of 100 jobs beside the big run and its twin in their projects, so each list page shows several runs. */
export const FILLERS = QUICK ? 2 : 9;
const FILLER_JOBS = 100;

/**
 * Queue order (priority): the twin's jobs ask for an image, so only a claimer with a container runtime is handed
 * them, and they are first in its queue; the big run's jobs ask for none, so they are first in the queue of a
 * claimer without one. Each claimer so takes from the top of its own queue index, holding both runs' jobs, and the
 * claim's cost is compared between a job of the big run and one of the twin. Everything else comes last.
 */
export const PRIORITY = { twin: 2, big: 1, other: -1 };
const IMAGE = 'ghcr.io/example/trainer:2026.07.1';

export const spec = (i: number, image = false) => ({
  commands: [`python train.py --shard ${i}`, 'python eval.py'],
  ...(image ? { image: IMAGE } : {}),
  env: { SHARD: String(i) },
  resources: { cpu: 1, memory_mib: 1024 },
});

/** A binary tree of job_groups below the root, `DEPTH` levels, as submit's refs. */
function treeRefs(): { ref: string; parent_ref?: string }[] {
  const out: { ref: string; parent_ref?: string }[] = [];
  let level: (string | undefined)[] = [undefined];
  for (let d = 1; d <= DEPTH; d++) {
    const next: string[] = [];
    for (const parent of level)
      for (const k of [0, 1]) {
        const ref = `${parent ?? 'g'}.${k}`;
        out.push({ ref, ...(parent ? { parent_ref: parent } : {}) });
        next.push(ref);
      }
    level = next;
  }
  return out;
}

export interface TreeRun {
  id: string;
  project: string;
  /** Group ids in creation order: 0, then depth 1, ..., depth 5. */
  groups: number[];
  /** A group at depth 5 and one at depth 1. */
  leaf: number;
  branch: number;
}

/** A run with the depth-5 tree and one job in the root (a submit needs one). */
export async function submitTreeRun(
  server: ServerUnderTest,
  project: string,
  name: string,
  priority: number,
  image: boolean,
): Promise<TreeRun> {
  const refs = treeRefs();
  const res = await server.http<{ id: string }>(
    'POST',
    `/api/v1/projects/${project}/runs`,
    { run_name: name, priority, job_groups: refs, jobs: [{ name: 'seed', spec: spec(0, image) }] },
    201,
  );
  // planTree numbers the request's groups 1.. in request order (parents come first in refs).
  const groups = [0, ...refs.map((_, i) => i + 1)];
  return { id: res.body.id, project, groups, leaf: groups[groups.length - 1], branch: 1 };
}

/** The group request `r` of the growth goes to: round-robin over every group, the root included. */
export const targetOf = (run: TreeRun, r: number) => run.groups[r % run.groups.length];

/** Adds `n` jobs to a group; returns the request's wall time in ms. */
export async function addJobs(
  server: ServerUnderTest,
  run: TreeRun,
  group: number,
  first: number,
  n: number,
  image: boolean,
): Promise<number> {
  const body = { jobs: Array.from({ length: n }, (_, i) => ({ name: 'shard', spec: spec(first + i, image) })) };
  const t0 = performance.now();
  await server.http('POST', `/api/v1/projects/${run.project}/runs/${run.id}/job-groups/${group}/jobs`, body, 201);
  return performance.now() - t0;
}

/** Runs of FILLER_JOBS jobs (low priority: never claimed by the bench's claimers before the runs it compares). */
export async function fillers(server: ServerUnderTest, project: string): Promise<void> {
  for (let k = 0; k < FILLERS; k++)
    await server.http(
      'POST',
      `/api/v1/projects/${project}/runs`,
      { priority: PRIORITY.other, jobs: [{ name: 'filler', spec: spec(k), replicas: FILLER_JOBS }] },
      201,
    );
}

/** A run whose group 1 holds 10 jobs: a small cancellation target. */
export async function smallCancelTarget(server: ServerUnderTest, project: string): Promise<string> {
  const res = await server.http<{ id: string }>(
    'POST',
    `/api/v1/projects/${project}/runs`,
    {
      priority: PRIORITY.other,
      job_groups: [{ ref: 'ten' }],
      jobs: [{ name: 'ten', group_ref: 'ten', spec: spec(0), replicas: 10 }],
    },
    201,
  );
  return res.body.id;
}

/**
 * A worker that claims one submission at a time and times only the claim; what it claimed is then reported running
 * and done (untimed), so nothing piles up on leases. `expectRun`: the run whose job must come first.
 */
export class TimedClaimer {
  private readonly worker: ReferenceWorker;

  constructor(post: Post, id: string, containers: boolean) {
    const capacity = { cpu: 64, memory_mib: 256 * 1024, gpu: 0 };
    this.worker = new ReferenceWorker(post, id, capacity, containers ? { container_runtime: 'simulated' } : {});
  }

  static forServer(server: ServerUnderTest, token: string, id: string, containers: boolean): TimedClaimer {
    return new TimedClaimer(httpPost(server.baseUrl, token), id, containers);
  }

  /** One claim, in ms; throws when it was handed nothing or another run's job than `expectRun` (if given). */
  async claimOnce(expectRun?: string): Promise<number> {
    const t0 = performance.now();
    const got = await this.worker.claim(1);
    const ms = performance.now() - t0;
    const [s] = got;
    if (!s) throw new Error(`${this.worker.workerId}: the claim was handed nothing`);
    if (expectRun && s.run_id !== expectRun)
      throw new Error(`${this.worker.workerId}: handed a job of run ${s.run_id}, expected one of ${expectRun}`);
    const running = await this.worker.running(s.id);
    if (running.status !== 200) throw new Error(`running: ${running.status} ${JSON.stringify(running.body)}`);
    const done = await this.worker.complete(s.id, DONE);
    if (done.status !== 200) throw new Error(`complete: ${done.status} ${JSON.stringify(done.body)}`);
    return ms;
  }

  /** One claim in ms and how many it was handed (maybe none), finishing what it got. */
  async claimAny(): Promise<{ ms: number; handed: number }> {
    const t0 = performance.now();
    const got = await this.worker.claim(1);
    const ms = performance.now() - t0;
    for (const s of got) {
      await this.worker.running(s.id);
      await this.worker.complete(s.id, DONE);
    }
    return { ms, handed: got.length };
  }
}

/** Seeded pseudo-random numbers in [0, 1) (mulberry32): the same BENCH_SEED gives the same orders. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Pair {
  name: string;
  big: () => Promise<number>;
  twin: () => Promise<number>;
}

/**
 * Pairs of contenders timed side by side, each call timing itself (ms): every iteration takes every pair once, the
 * pairs in a shuffled order and the two of a pair back to back in a random order, so both of a pair follow the same
 * requests on average. (A fixed rotation of one list kept each contender after the same neighbour: the big run's
 * cost always came right after the twin's run view and its garbage, and measured 1.65× the twin's for nothing.)
 */
export async function pairsSideBySide(
  pairs: Pair[],
  iterations: number,
  warmup: number,
  seed: number,
): Promise<Map<string, { big: number[]; twin: number[] }>> {
  const next = random(seed);
  const out = new Map(pairs.map((p) => [p.name, { big: [] as number[], twin: [] as number[] }]));
  for (let i = 0; i < warmup + iterations; i++) {
    const order = pairs.map((p) => ({ p, key: next() })).sort((a, b) => a.key - b.key);
    for (const { p } of order) {
      const sides = next() < 0.5 ? (['big', 'twin'] as const) : (['twin', 'big'] as const);
      for (const side of sides) {
        const ms = await p[side]();
        if (i >= warmup) out.get(p.name)?.[side].push(ms);
      }
    }
  }
  return out;
}
