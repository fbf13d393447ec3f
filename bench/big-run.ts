import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import {
  addJobs,
  BATCH,
  BIG_JOBS,
  fillers,
  pairsSideBySide,
  PRIORITY,
  REQUESTS,
  smallCancelTarget,
  submitTreeRun,
  targetOf,
  TimedClaimer,
  TWIN_SCALE,
  type TreeRun,
} from './big-run-shape';
import { processCpuSeconds, ServerUnderTest } from './server-under-test';
import { fmtInt, fmtMs, fmtRatio, log, median, mismatchText, printTable, QUICK, type TargetResult } from './support';

/**
 * `npm run bench -- big-run` (issue #19, items 3 and 5): one run grown to 1,000,000 jobs in depth-5 groups through
 * add-jobs requests of 10,000 (each timed), beside a twin of the same shape grown by the same requests scaled down
 * 100 times, in one database, against a server in its own process (its resident memory sampled throughout). Then,
 * side by side in one interleaved loop, the reads and the claim on both runs; cancelling the big run's root against
 * cancelling 10-job groups; the sweep that ends the cancelled run's queued submissions, with claims and views timed
 * meanwhile; the invariants report over everything; deleting the big run.
 */

const SUITE = 'big-run';
const ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 5 : 50);
const WARMUP = QUICK ? 1 : 3;
/** Seeds the order of the interleaved loop (BENCH_SEED replays one). */
const SEED = Number(process.env.BENCH_SEED) || 19;
const SMALL_CANCELS = QUICK ? 3 : 5;
/** How long to follow the sweep of the big run's queued submissions before projecting its end. */
const SWEEP_WAIT_S = Number(process.env.BENCH_SWEEP_WAIT_S) || (QUICK ? 30 : 180);
const MEMORY_MIB = 512;
/** The ends of the growth compared: the median of this many requests at each end (one request is too noisy). */
const ENDS = Math.min(5, Math.floor(REQUESTS / 2));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Ctx {
  server: ServerUnderTest;
  big: TreeRun;
  twin: TreeRun;
  bigClaimer: TimedClaimer;
  twinClaimer: TimedClaimer;
  memory: [string, number][];
}

export async function runBigRun(): Promise<TargetResult[]> {
  const t0 = performance.now();
  const server = await ServerUnderTest.start('big-run', join(__dirname, '../src/cli.js'));
  try {
    log(
      `\n## big-run: a run of ${fmtInt(BIG_JOBS)} jobs (depth-5 groups) against its twin of ` +
        fmtInt(BIG_JOBS / TWIN_SCALE),
    );
    const ctx = await setUp(server);
    const results = [
      ...(await grow(ctx)),
      ...(await sideBySide(ctx)),
      ...(await cancelAndSweep(ctx)),
      ...(await invariantsAndDelete(ctx)),
    ];
    const peak = server.peakRssMiB();
    printTable(
      `${SUITE}: the server's peak resident memory (sampled every 250 ms), cumulative after each phase`,
      ['after', 'peak RSS MiB'],
      ctx.memory.map(([phase, mib]) => [phase, mib.toFixed(0)]),
      [`whole bench: ${((performance.now() - t0) / 60_000).toFixed(1)} min`],
    );
    results.push({
      suite: SUITE,
      target: `server memory < ${MEMORY_MIB} MiB through all of it`,
      measured: `${peak.toFixed(0)} MiB peak`,
      pass: peak < MEMORY_MIB,
    });
    return results;
  } catch (err) {
    log(`server output:\n${server.lastOutput()}`);
    throw err;
  } finally {
    await server.stop();
  }
}

async function setUp(server: ServerUnderTest): Promise<Ctx> {
  const bigProject = await server.createProject('bench-big');
  const twinProject = await server.createProject('bench-twin');
  const token = await server.serviceToken('bench-big-run-workers');
  const big = await submitTreeRun(server, bigProject, 'big', PRIORITY.big, false);
  const twin = await submitTreeRun(server, twinProject, 'twin', PRIORITY.twin, true);
  await fillers(server, bigProject);
  await fillers(server, twinProject);
  return {
    server,
    big,
    twin,
    bigClaimer: TimedClaimer.forServer(server, token, 'big-claimer', false),
    twinClaimer: TimedClaimer.forServer(server, token, 'twin-claimer', true),
    memory: [['set-up', server.peakRssMiB()]],
  };
}

/** The growth: request r adds BATCH jobs to the big run and BATCH / 100 to the twin, in the same group. */
async function grow(ctx: Ctx): Promise<TargetResult[]> {
  const { server, big, twin } = ctx;
  const times: number[] = [];
  const cpu: { server: number; db: number }[] = [];
  const rss: number[] = [];
  const db = await server.dbClient();
  // The server's own backends, read from /proc like the server's CPU: unlike wall time, neither counts the time the
  // machine's other work took from them.
  const backendsCpu = async () => {
    const { rows } = await db.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
    );
    return rows.reduce((n, r) => n + processCpuSeconds(r.pid), 0);
  };
  const started = performance.now();
  try {
    for (let r = 0; r < REQUESTS; r++) {
      const group = targetOf(big, r);
      // Each end of the comparison starts from a checkpoint just taken (untimed): the growth writes WAL fast enough
      // for a checkpoint every ~10 s, each writing pages out for ~9 s, so the last requests ran inside one while the
      // first ran before any (1.34× in one run, 0.91× in the next, CPU flat in both).
      if (r === 0 || r === REQUESTS - ENDS) await db.query('CHECKPOINT');
      const [server0, db0] = [server.cpuSeconds(), await backendsCpu()];
      times.push(await addJobs(server, big, group, 1 + r * BATCH, BATCH, false));
      cpu.push({ server: (server.cpuSeconds() - server0) * 1000, db: ((await backendsCpu()) - db0) * 1000 });
      await addJobs(server, twin, group, 1 + (r * BATCH) / TWIN_SCALE, BATCH / TWIN_SCALE, true);
      rss.push(server.rssKiB() / 1024);
      if ((r + 1) % 10 === 0)
        log(
          `  ${fmtInt((r + 1) * BATCH)} jobs: last request ${fmtMs(times[r])} ms, RSS ${rss[r].toFixed(0)} MiB, ` +
            `${((performance.now() - started) / 1000).toFixed(0)} s`,
        );
    }
    await db.query('ANALYZE'); // what autovacuum does after such growth; done now so plans don't change mid-loop
  } finally {
    await db.end();
  }
  ctx.memory.push(['growth', server.peakRssMiB()]);
  const ends = (xs: number[]) => [median(xs.slice(0, ENDS)), median(xs.slice(-ENDS))];
  // The verdict takes the fastest request at each end: other work on the machine only ever adds to a request's time
  // (the CPU columns say whether the requests themselves grew).
  const [first, last] = [Math.min(...times.slice(0, ENDS)), Math.min(...times.slice(-ENDS))];
  const [firstP50, lastP50] = ends(times);
  const [serverFirst, serverLast] = ends(cpu.map((c) => c.server));
  const [dbFirst, dbLast] = ends(cpu.map((c) => c.db));
  const marks = [
    ...new Set([0, 1, 4, ...Array.from({ length: 10 }, (_, k) => Math.round(((k + 1) * REQUESTS) / 10) - 1)]),
  ].sort((a, b) => a - b);
  printTable(
    `${SUITE}: add-jobs requests of ${fmtInt(BATCH)} jobs to the big run (round-robin over its 63 groups)`,
    ['request', 'jobs before', 'ms', 'server CPU ms', 'PostgreSQL CPU ms', 'server RSS MiB'],
    marks
      .filter((r) => r < REQUESTS)
      .map((r) => [
        String(r + 1),
        fmtInt(1 + r * BATCH),
        fmtMs(times[r]),
        cpu[r].server.toFixed(0),
        cpu[r].db.toFixed(0),
        rss[r].toFixed(0),
      ]),
    [
      `first and last ${ENDS}: fastest ${fmtMs(first)} → ${fmtMs(last)} ms (${fmtRatio(last / first)}), medians ` +
        `${fmtMs(firstP50)} → ${fmtMs(lastP50)} ms (${fmtRatio(lastP50 / firstP50)}); CPU medians: ` +
        `server CPU ${serverFirst.toFixed(0)} → ${serverLast.toFixed(0)} ms (${fmtRatio(serverLast / serverFirst)}); ` +
        `PostgreSQL CPU ${dbFirst.toFixed(0)} → ${dbLast.toFixed(0)} ms (${fmtRatio(dbLast / dbFirst)})`,
      `first and last alone: ${fmtMs(times[0])} / ${fmtMs(times[REQUESTS - 1])} ms`,
    ],
  );
  return [
    {
      suite: SUITE,
      target: `the last ${fmtInt(BATCH)}-job add-jobs request ≤ 1.3× the first`,
      measured: fmtRatio(last / first),
      pass: last <= 1.3 * first,
      note:
        `fastest of ${ENDS} at each end: ${fmtMs(last)} vs ${fmtMs(first)} ms (medians ` +
        `${fmtRatio(lastP50 / firstP50)}); CPU server ${fmtRatio(serverLast / serverFirst)}, PostgreSQL ` +
        fmtRatio(dbLast / dbFirst),
    },
  ];
}

/** The reads and the claim on both runs, interleaved (see pairsSideBySide). */
async function sideBySide(ctx: Ctx): Promise<TargetResult[]> {
  const { server, big, twin } = ctx;
  const get = async (path: string) => {
    const t0 = performance.now();
    const res = await server.send('GET', path, undefined);
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`GET ${path} → ${res.status}: ${res.text.slice(0, 300)}`);
    return ms;
  };
  const runUrl = (r: TreeRun) => `/api/v1/projects/${r.project}/runs/${r.id}`;
  const measures: { name: string; of: (r: TreeRun) => () => Promise<number>; bound?: number }[] = [
    { name: 'group view, depth 5', of: (r) => () => get(`${runUrl(r)}/job-groups/${r.leaf}`), bound: 1.5 },
    { name: 'group view, root', of: (r) => () => get(`${runUrl(r)}/job-groups/0`), bound: 1.5 },
    { name: 'run view (defaults)', of: (r) => () => get(runUrl(r)), bound: 1.5 },
    { name: 'run cost', of: (r) => () => get(`${runUrl(r)}/cost`), bound: 1.5 },
    {
      name: 'claim (1 job, from the top of the queue)',
      of: (r) => () => (r === big ? ctx.bigClaimer : ctx.twinClaimer).claimOnce(r.id),
      bound: 1.5,
    },
    { name: 'runs list page (defaults)', of: (r) => () => get(`/api/v1/projects/${r.project}/runs`), bound: 1.5 },
    { name: 'jobs page of a depth-5 group', of: (r) => () => get(`${runUrl(r)}/job-groups/${r.leaf}/jobs`) },
    {
      name: 'jobs page of a depth-1 subtree',
      of: (r) => () => get(`${runUrl(r)}/job-groups/${r.branch}/jobs?recursive=true`),
    },
    {
      name: 'jobs page of the run, status=running (none is)',
      of: (r) => () => get(`${runUrl(r)}/job-groups/0/jobs?recursive=true&status=running`),
    },
    { name: 'children page of the root', of: (r) => () => get(`${runUrl(r)}/job-groups/0/job-groups`) },
    { name: "events page (the run's)", of: (r) => () => get(`/api/v1/projects/${r.project}/events?run_id=${r.id}`) },
  ];
  const samples = await pairsSideBySide(
    measures.map((m) => ({ name: m.name, big: m.of(big), twin: m.of(twin) })),
    ITERATIONS,
    WARMUP,
    SEED,
  );
  ctx.memory.push(['reads and claims', server.peakRssMiB()]);
  const p50 = (name: string, r: 'big' | 'twin') => median(samples.get(name)?.[r] ?? []);
  printTable(
    `${SUITE}: p50 ms at ${fmtInt(BIG_JOBS)} jobs against ${fmtInt(BIG_JOBS / TWIN_SCALE)}, ${ITERATIONS} iterations ` +
      `interleaved (pairs shuffled, seed ${SEED})`,
    ['measure', `${fmtInt(BIG_JOBS)} jobs`, `${fmtInt(BIG_JOBS / TWIN_SCALE)} jobs`, 'ratio', 'target'],
    measures.map((m) => [
      m.name,
      fmtMs(p50(m.name, 'big')),
      fmtMs(p50(m.name, 'twin')),
      fmtRatio(p50(m.name, 'big') / p50(m.name, 'twin')),
      m.bound ? `≤ ${m.bound}×` : '',
    ]),
    [
      "claim: the twin's jobs carry an image, so a claimer with a container runtime finds them first; the big run's " +
        'carry none, so a claimer without one finds them first (each claim reports its job done, untimed)',
    ],
  );
  return measures
    .filter((m) => m.bound !== undefined)
    .map((m) => {
      const r = p50(m.name, 'big') / p50(m.name, 'twin');
      return {
        suite: SUITE,
        target: `${m.name} at ${fmtInt(BIG_JOBS)} jobs ≤ ${m.bound}× at ${fmtInt(BIG_JOBS / TWIN_SCALE)}`,
        measured: fmtRatio(r),
        pass: r <= (m.bound ?? Infinity),
        note: `p50 ${fmtMs(p50(m.name, 'big'))} vs ${fmtMs(p50(m.name, 'twin'))} ms`,
      };
    });
}

/**
 * Cancelling the big run's root against cancelling 10-job groups (fresh targets, cancelled once each, just before),
 * then the sweep of its queued submissions, followed for up to SWEEP_WAIT_S while the twin is claimed from and read.
 */
async function cancelAndSweep(ctx: Ctx): Promise<TargetResult[]> {
  const { server, big, twin } = ctx;
  const cancelProject = await server.createProject('bench-cancel');
  const targets: string[] = [];
  for (let k = 0; k < SMALL_CANCELS; k++) targets.push(await smallCancelTarget(server, cancelProject));
  const cancel = async (project: string, runId: string, group: number) => {
    const t0 = performance.now();
    await server.http('POST', `/api/v1/projects/${project}/runs/${runId}/job-groups/${group}/cancel`, {}, 200);
    return performance.now() - t0;
  };
  const db = await server.dbClient();
  const queued = async () =>
    (
      await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM job_submissions WHERE run_id = $1 AND status = 'submitted'`,
        [big.id],
      )
    ).rows[0].n;
  const before = await queued();
  // Queued work of other runs in the big claimer's queue (no image needed), below the big run's by priority.
  const otherQueued = (
    await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM job_submissions
        WHERE status = 'submitted' AND NOT needs_container AND run_id <> ALL($1::uuid[])`,
      [[big.id, ...targets]],
    )
  ).rows[0].n;
  // The small cancels right before the big one, in the same conditions: timed right after the counts above (which
  // read a million rows), the one big cancel took 33 ms in one run and 6 ms in the next.
  const small: number[] = [];
  for (const id of targets) small.push(await cancel(cancelProject, id, 1));
  const bigCancel = await cancel(big.project, big.id, 0);
  const sweepStart = performance.now();

  // While the sweep runs: claims of the twin (its own queue), claims of the big run's queue (which meet the
  // cancelled submissions first), and the twin's run view.
  const during = { twinClaim: [] as number[], bigClaim: [] as number[], twinView: [] as number[], bigHanded: 0 };
  let sweeping = true;
  const neighbours = (async () => {
    while (sweeping) {
      during.twinClaim.push(await ctx.twinClaimer.claimOnce(twin.id));
      const claimed = await ctx.bigClaimer.claimAny();
      during.bigClaim.push(claimed.ms);
      during.bigHanded += claimed.handed;
      const t0 = performance.now();
      const res = await server.send('GET', `/api/v1/projects/${twin.project}/runs/${twin.id}`, undefined);
      if (res.status !== 200) throw new Error(`twin view → ${res.status}`);
      during.twinView.push(performance.now() - t0);
      await sleep(100);
    }
  })();
  let left = before;
  const samples: [number, number][] = [[0, before]];
  try {
    while (left > 0 && performance.now() - sweepStart < SWEEP_WAIT_S * 1000) {
      await sleep(2000);
      left = await queued();
      samples.push([(performance.now() - sweepStart) / 1000, left]);
    }
  } finally {
    sweeping = false;
    await neighbours;
    await db.end();
  }
  ctx.memory.push(['cancel and sweep', server.peakRssMiB()]);
  const elapsed = (performance.now() - sweepStart) / 1000;
  const rate = (before - left) / elapsed;
  const total = left === 0 ? elapsed : before / Math.max(rate, 1e-9);
  const smallP50 = median(small);
  printTable(
    `${SUITE}: cancelling the big run's root (once) against cancelling 10-job groups (${SMALL_CANCELS} fresh runs)`,
    ['measure', 'ms'],
    [
      [`cancel the root of the ${fmtInt(BIG_JOBS)}-job run`, fmtMs(bigCancel)],
      [`cancel a 10-job group, p50 of ${SMALL_CANCELS}`, fmtMs(smallP50)],
      ['ratio', fmtRatio(bigCancel / smallP50)],
    ],
  );
  printTable(
    `${SUITE}: the sweep of the cancelled run's ${fmtInt(before)} queued submissions, followed ${elapsed.toFixed(0)} s`,
    ['measure', 'p50 ms', 'max ms', 'n'],
    [
      ["claim of the twin's queue during the sweep", ...summary(during.twinClaim)],
      ["claim of the big run's queue during the sweep", ...summary(during.bigClaim)],
      ["the twin's run view during the sweep", ...summary(during.twinView)],
    ],
    [
      `claims of the big run's queue handed a job ${during.bigHanded} times of ${during.bigClaim.length}, while ` +
        `${fmtInt(otherQueued)} jobs of other runs that fit waited behind the cancelled ones`,
      `queued left: ${samples
        .filter((_, k) => k % 5 === 0 || k === samples.length - 1)
        .map(([s, n]) => `${s.toFixed(0)} s ${fmtInt(n)}`)
        .join(', ')}`,
      left === 0
        ? `all ended after ${elapsed.toFixed(0)} s (${fmtInt(Math.round(rate))}/s)`
        : `${fmtInt(left)} left after ${elapsed.toFixed(0)} s: ${fmtInt(Math.round(rate))}/s, all ended in ` +
          `about ${(total / 60).toFixed(1)} min at that rate`,
    ],
  );
  return [
    {
      suite: SUITE,
      target: `cancelling the root of the ${fmtInt(BIG_JOBS)}-job run ≤ 2× cancelling a 10-job group`,
      measured: fmtRatio(bigCancel / smallP50),
      pass: bigCancel <= 2 * smallP50,
      note: `${fmtMs(bigCancel)} vs p50 ${fmtMs(smallP50)} ms`,
    },
    {
      suite: SUITE,
      target: `its ${fmtInt(before)} queued submissions ended within ${SWEEP_WAIT_S} s (not 17 min of passes of 1,000)`,
      measured: left === 0 ? `${elapsed.toFixed(0)} s` : `≈ ${(total / 60).toFixed(1)} min projected`,
      pass: left === 0,
      note: `${fmtInt(Math.round(rate))} ended/s; twin claims meanwhile p50 ${fmtMs(median(during.twinClaim))} ms`,
    },
  ];
}

/** The invariants report over the whole database (it reads every job), then deleting the big run. */
async function invariantsAndDelete(ctx: Ctx): Promise<TargetResult[]> {
  const { server, big } = ctx;
  const t0 = performance.now();
  const mismatches = await server.invariantMismatches();
  const invariantsMs = performance.now() - t0;
  ctx.memory.push(['invariants report', server.peakRssMiB()]);
  const t1 = performance.now();
  await server.http('DELETE', `/api/v1/projects/${big.project}/runs/${big.id}`, undefined, 204);
  const deleteMs = performance.now() - t1;
  ctx.memory.push(['delete', server.peakRssMiB()]);
  printTable(
    `${SUITE}: whole-database and whole-run work`,
    ['measure', 'ms'],
    [
      ['GET /admin/v1/invariants', fmtMs(invariantsMs)],
      [`DELETE the ${fmtInt(BIG_JOBS)}-job run`, fmtMs(deleteMs)],
    ],
  );
  return [
    {
      suite: SUITE,
      target: 'invariant mismatches after = 0',
      measured: String(mismatches.length),
      pass: mismatches.length === 0,
      note: mismatchText(mismatches),
    },
  ];
}

function summary(samples: number[]): string[] {
  return samples.length === 0
    ? ['-', '-', '0']
    : [fmtMs(median(samples)), fmtMs(Math.max(...samples)), String(samples.length)];
}
