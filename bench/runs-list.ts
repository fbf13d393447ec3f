import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { required } from '../src/common/required';
import { runListBytes } from './runs-list-bytes';
import {
  FOLDED_REASON,
  groupBySql,
  growHistory,
  JobSet,
  numberOf,
  prepareHelpers,
  submitRuns,
  windowSql,
} from './runs-list-data';
import { ServerUnderTest } from './server-under-test';
import {
  BenchEnv,
  fmtBytes,
  fmtInt,
  fmtMs,
  fmtRatio,
  log,
  measureSideBySide,
  printTable,
  QUICK,
  Stats,
  TargetResult,
  verdict,
} from './support';

/**
 * Runs list (targets.md, "Runs list"): GET /projects/{p}/runs?limit=100&job_submissions_limit=N end to end over HTTP,
 * against two raw-SQL baselines on the same database in the same run (dstack's window query, twice, and the seed's
 * GROUP BY proposal), as history per job grows H = 1 → 10 → 100 → 1000 on the same 100 runs × 4 jobs. The flat
 * targets time those runs at the deepest H against twins kept at H = N (BASE_PROJECTS) in the same loop. Then issue
 * #19's page bytes against a server in a process of its own (runs-list-bytes.ts).
 */

const SUITE = 'runs-list';
const LISTED_PROJECT = 'bench-list';
const BACKGROUND_PROJECT = 'bench-background';
/**
 * Shallow twins of the listed project (as many runs, the same shape) that keep history H = N while the listed runs'
 * grows: the flat targets compare p50(H=1000) with p50(H=N), and timing both in the same interleaved loop keeps the
 * machine's drift between phases minutes apart out of that ratio (targets.md: every target side by side in one run).
 */
const BASE_PROJECTS: Record<number, string> = { 1: 'bench-list-h1', 10: 'bench-list-h10' };
const LISTED_RUNS = QUICK ? 20 : 100;
const BACKGROUND_RUNS = QUICK ? 20 : 200;
/** History of the background runs' jobs (half with gaps), loaded once. */
const BACKGROUND_H = 20;
/** BENCH_H_LEVELS=1,10,1000 overrides the levels (must start at 1 and include 10 for the N=10 ratio). */
const H_LEVELS = process.env.BENCH_H_LEVELS
  ? process.env.BENCH_H_LEVELS.split(',').map(Number)
  : QUICK
    ? [1, 10, 50]
    : [1, 10, 100, 1000];
/** BENCH_EXPLAIN=1 prints EXPLAIN (ANALYZE, BUFFERS) of the SQL contenders at the deepest H. */
const EXPLAIN = process.env.BENCH_EXPLAIN === '1';
const H_MAX = H_LEVELS[H_LEVELS.length - 1];
const EXACT_NS = [1, 3, 10];
const TIMED_NS = [1, 10];
const ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 5 : 20);
const WARMUP = QUICK ? 1 : 3;

interface ListJob {
  id: string;
  job_num: number;
  replica_num: number;
  status: string;
  submission_count: number;
  folded_submissions: Record<string, number>;
  latest_job_submission: { id: string; submission_num: number } | null;
  job_submissions: { id: string; submission_num: number }[];
}
interface ListRun {
  id: string;
  jobs: ListJob[];
}
interface ListPage {
  items: ListRun[];
  next_cursor: string | null;
}

const PROJECT_OF: Record<JobSet, string> = {
  listed: LISTED_PROJECT,
  background: BACKGROUND_PROJECT,
  h1: BASE_PROJECTS[1],
  h10: BASE_PROJECTS[10],
};

/** Runs through the API: the listed project's runs interleaved with the background project's and the twins'. */
function runsPlan(): { project: string; set: JobSet }[] {
  // Interleaved, as runs of different projects arrive over time: k background runs, then a listed one and one of
  // each twin, and so on.
  const plan: JobSet[] = [];
  const perListed = Math.max(1, Math.round(BACKGROUND_RUNS / LISTED_RUNS));
  let bg = 0;
  for (let i = 0; i < LISTED_RUNS; i++) {
    for (let k = 0; k < perListed && bg < BACKGROUND_RUNS; k++, bg++) plan.push('background');
    plan.push('listed', 'h1', 'h10');
  }
  for (; bg < BACKGROUND_RUNS; bg++) plan.push('background');
  return plan.map((set) => ({ project: PROJECT_OF[set], set }));
}

/** The N newest existing submissions of every listed job, ascending, by brute force: all of them, sorted in JS. */
async function bruteForce(env: BenchEnv, jobIds: string[], ns: number[]): Promise<Map<number, Map<string, string[]>>> {
  const { rows } = await env.pool.query<{ job_id: string; id: string; submission_num: number }>(
    `SELECT job_id, id, submission_num FROM job_submissions WHERE job_id = ANY($1::uuid[])`,
    [jobIds],
  );
  const perJob = new Map<string, { id: string; num: number }[]>(jobIds.map((id) => [id, []]));
  for (const r of rows)
    required(perJob.get(r.job_id), `the submissions of job ${r.job_id}`).push({ id: r.id, num: r.submission_num });
  const out = new Map<number, Map<string, string[]>>();
  for (const n of ns) {
    const m = new Map<string, string[]>();
    for (const [job, subs] of perJob) {
      const desc = [...subs].sort((a, b) => b.num - a.num);
      m.set(
        job,
        desc
          .slice(0, n)
          .reverse()
          .map((s) => s.id),
      );
    }
    out.set(n, m);
  }
  return out;
}

const listPath = (n: number, project = LISTED_PROJECT) =>
  `/api/v1/projects/${project}/runs?limit=100&job_submissions_limit=${n}`;

/** Checks the endpoint against the brute force for every job; throws (loudly) on any difference. */
async function checkExact(
  env: BenchEnv,
  h: number,
  listedRunIds: string[],
  gappedByJob: Map<string, boolean>,
): Promise<string[]> {
  const listedJobIds = [...gappedByJob.keys()];
  const expected = await bruteForce(env, listedJobIds, EXACT_NS);
  const lines: string[] = [];
  for (const n of EXACT_NS) {
    const page = (await env.http<ListPage>('GET', listPath(n), undefined, 200)).body;
    const problems: string[] = [];
    const runIds = new Set(page.items.map((r) => r.id));
    if (page.items.length !== listedRunIds.length || listedRunIds.some((id) => !runIds.has(id))) {
      problems.push(`page has ${page.items.length} runs, expected exactly the ${listedRunIds.length} listed runs`);
    }
    let jobs = 0;
    let rows = 0;
    for (const run of page.items) {
      for (const job of run.jobs) {
        jobs++;
        const want = required(expected.get(n), `the brute force at N=${n}`).get(job.id);
        const got = job.job_submissions.map((s) => s.id);
        rows += got.length;
        if (!want) {
          problems.push(`job ${job.id} of run ${run.id} is not a listed job`);
          continue;
        }
        if (got.length !== want.length || got.some((id, i) => id !== want[i])) {
          problems.push(
            `H=${h} N=${n} job ${job.id}: got [${job.job_submissions.map((s) => s.submission_num).join(',')}] ids ` +
              `${got.join(',')}; expected ids ${want.join(',')}`,
          );
        }
        const nums = job.job_submissions.map((s) => s.submission_num);
        if (nums.some((x, i) => i > 0 && x <= nums[i - 1]))
          problems.push(`job ${job.id}: submissions not ascending: ${nums.join(',')}`);
        const newest = want[want.length - 1];
        if (job.latest_job_submission?.id !== newest)
          problems.push(`job ${job.id}: latest_job_submission ${job.latest_job_submission?.id} ≠ newest ${newest}`);
        // Default fields: the documents on the newest submission only, once (not again on latest_job_submission).
        const documents = job.job_submissions.map((s) => 'runtime_data' in s);
        if (
          documents.some((d, i) => d !== (i === documents.length - 1)) ||
          'runtime_data' in (job.latest_job_submission ?? {})
        )
          problems.push(`job ${job.id}: documents on [${documents.join(',')}], expected on the newest only`);
        const made = numberOf(h - 1, required(gappedByJob.get(job.id), `whether job ${job.id} has gaps`)) + 1;
        const folded = (job.folded_submissions[FOLDED_REASON] ?? 0) as number;
        if (job.submission_count !== made || folded !== made - h) {
          problems.push(
            `job ${job.id}: submission_count ${job.submission_count}, folded ${folded}; expected ${made} made, ` +
              `${made - h} folded`,
          );
        }
      }
    }
    if (jobs !== listedJobIds.length) problems.push(`page has ${jobs} jobs, expected ${listedJobIds.length}`);
    if (problems.length > 0) {
      throw new Error(
        `EXACTNESS FAILED at H=${h}, N=${n}: ${problems.length} problems; first ones:\n  ` +
          `${problems.slice(0, 10).join('\n  ')}`,
      );
    }
    lines.push(
      `H=${h} N=${n}: ${jobs} jobs, ${rows} submissions, every job's ids equal the brute force; submission_count ` +
        `and folded_submissions as generated; documents on each job's newest only`,
    );
  }
  return lines;
}

/** The baselines with every column (the bytes part selects the page's own: runs-list-bytes.ts). */
const WINDOW_SQL = (onlyTerminated: boolean) => windowSql(onlyTerminated);
const GROUP_BY_SQL = groupBySql();
/**
 * For reference only: a LATERAL newest-first fetch as raw SQL (rows only, no HTTP/JSON), to show where the time goes.
 */
const LATERAL_SQL = `
  SELECT s.*
    FROM jobs j
   CROSS JOIN LATERAL (SELECT * FROM job_submissions x WHERE x.job_id = j.id ORDER BY x.submission_num DESC LIMIT $2) s
   WHERE j.run_id = ANY($1::uuid[])`;

interface Timed {
  h: number;
  n: number;
  ours: Stats;
  window: Stats;
  groupBy: Stats;
  lateral: Stats;
  /** Ours on the twin whose history is H = N (see BASE_PROJECTS), timed in the same loop. */
  oursAtN: Stats;
  rowsOurs: number;
  rowsOursAtN: number;
  bytesOurs: number;
  rowsWindow: [number, number];
  rowsGroupBy: number;
  rowsLateral: number;
}

async function timeLevel(env: BenchEnv, h: number, n: number, listedRunIds: string[]): Promise<Timed> {
  const pool = env.pool;
  const window = async () => {
    const a = await pool.query(WINDOW_SQL(false), [listedRunIds, Math.max(n, 1)]);
    const b = await pool.query(WINDOW_SQL(true), [listedRunIds, 1]);
    return [a.rowCount ?? 0, b.rowCount ?? 0] as [number, number];
  };
  const groupBy = async () => (await pool.query(GROUP_BY_SQL, [listedRunIds, n])).rowCount ?? 0;
  const lateral = async () => (await pool.query(LATERAL_SQL, [listedRunIds, n])).rowCount ?? 0;
  const ours = () => env.getRaw(listPath(n));
  const oursAtN = () => env.getRaw(listPath(n, BASE_PROJECTS[n]));

  // Row counts (outside the timing).
  const rowsOf = async (path: string) =>
    (await env.http<ListPage>('GET', path, undefined, 200)).body.items.reduce(
      (a, r) => a + r.jobs.reduce((b, j) => b + j.job_submissions.length, 0),
      0,
    );
  const rowsOurs = await rowsOf(listPath(n));
  const rowsOursAtN = await rowsOf(listPath(n, BASE_PROJECTS[n]));
  // The flat ratio compares equal numbers of returned rows (targets.md).
  if (h >= n && rowsOursAtN !== rowsOurs)
    throw new Error(`H=${h} N=${n}: the H=${n} twin returned ${rowsOursAtN} submissions, the listed runs ${rowsOurs}`);
  const bytesOurs = await ours();
  const rowsWindow = await window();
  const rowsGroupBy = await groupBy();
  const rowsLateral = await lateral();

  if (EXPLAIN && h === H_MAX) {
    for (const [label, sql, params] of [
      ['window (1st)', WINDOW_SQL(false), [listedRunIds, Math.max(n, 1)]],
      ['window (2nd)', WINDOW_SQL(true), [listedRunIds, 1]],
      ['GROUP BY', GROUP_BY_SQL, [listedRunIds, n]],
      ['LATERAL raw', LATERAL_SQL, [listedRunIds, n]],
    ] as const) {
      const { rows } = await pool.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, [...params]);
      log(
        `\n   EXPLAIN ${label}, H=${h} N=${n}:\n` +
          `${rows.map((r: Record<string, string>) => '     ' + r['QUERY PLAN']).join('\n')}`,
      );
    }
  }
  const s = await measureSideBySide({ ours, window, groupBy, lateral, oursAtN }, ITERATIONS, WARMUP);
  return { h, n, ...s, rowsOurs, rowsOursAtN, bytesOurs, rowsWindow, rowsGroupBy, rowsLateral };
}

async function storageFacts(env: BenchEnv): Promise<string> {
  const { rows } = await env.pool.query(
    `SELECT count(*)::int AS n,
            avg(octet_length(provisioning_data::text) + octet_length(runtime_data::text))::int AS text_bytes,
            min(octet_length(provisioning_data::text) + octet_length(runtime_data::text))::int AS text_min,
            max(octet_length(provisioning_data::text) + octet_length(runtime_data::text))::int AS text_max,
            avg(pg_column_size(provisioning_data) + pg_column_size(runtime_data))::int AS stored_bytes,
            pg_total_relation_size('job_submissions') AS total
       FROM job_submissions`,
  );
  const spec = await env.pool.query(
    `SELECT avg(octet_length(spec::text))::int AS avg, min(octet_length(spec::text))::int AS min,
            max(octet_length(spec::text))::int AS max FROM jobs`,
  );
  const r = rows[0];
  const sp = spec.rows[0];
  return (
    `${fmtInt(r.n)} submissions; provisioning_data + runtime_data ${r.text_min}–${r.text_max} B of JSON text ` +
    `(avg ${r.text_bytes} B, avg ${r.stored_bytes} B stored after TOAST compression); ` +
    `jobs.spec ${sp.min}–${sp.max} B (avg ${sp.avg} B); job_submissions total ${fmtBytes(Number(r.total))}`
  );
}

/** BENCH_RUNS_LIST_PARTS=levels,bytes picks parts (default both): the history levels, issue #19's page bytes. */
const PARTS = (process.env.BENCH_RUNS_LIST_PARTS ?? 'levels,bytes').split(',');

export async function runRunsList(env: BenchEnv): Promise<TargetResult[]> {
  const unknown = PARTS.filter((p) => p !== 'levels' && p !== 'bytes');
  if (unknown.length > 0) throw new Error(`BENCH_RUNS_LIST_PARTS: unknown ${unknown.join(', ')} (levels, bytes)`);
  const results: TargetResult[] = [];
  if (PARTS.includes('levels')) results.push(...(await runHistoryLevels(env)));
  if (PARTS.includes('bytes')) {
    // A server of its own (the built CLI's serve on a fresh database): its CPU per page is its own.
    const server = await ServerUnderTest.start('runs-list-bytes', join(__dirname, '../src/cli.js'));
    try {
      results.push(...(await runListBytes(server)));
    } catch (err) {
      log(`runs-list-bytes server output:\n${server.lastOutput()}`);
      throw err;
    } finally {
      await server.stop();
    }
  }
  return results;
}

/** Targets.md's runs-list targets: the same listed runs as history grows, against baselines and shallow twins. */
async function runHistoryLevels(env: BenchEnv): Promise<TargetResult[]> {
  if (
    H_LEVELS[0] !== 1 ||
    !H_LEVELS.includes(10) ||
    H_LEVELS.some((h, i) => !Number.isInteger(h) || (i > 0 && h <= H_LEVELS[i - 1]))
  ) {
    // The flat targets compare the deepest H with H=N for N = 1 and 10: found out now, not after minutes of loading.
    throw new Error(
      `BENCH_H_LEVELS=${process.env.BENCH_H_LEVELS}: want increasing integers starting at 1 and including 10`,
    );
  }
  const t0 = performance.now();
  log(
    `\n## runs-list: ${LISTED_RUNS} listed runs × 4 jobs (2 job_nums × 2 replicas), ${BACKGROUND_RUNS} background ` +
      `runs (H=${BACKGROUND_H}) in another project`,
  );
  log(
    `   H levels ${H_LEVELS.join(', ')} on the same listed runs (half of the jobs with gaps: every 3rd number ` +
      `missing); ${ITERATIONS} timed iterations after ${WARMUP} warm-up, contenders interleaved`,
  );

  const settings = await env.pool.query(
    `SELECT current_setting('server_version') AS v, current_setting('work_mem') AS wm,
            current_setting('shared_buffers') AS sb, current_setting('max_parallel_workers_per_gather') AS par`,
  );
  const st = settings.rows[0];
  log(
    `   PostgreSQL ${st.v}, work_mem ${st.wm}, shared_buffers ${st.sb}, max_parallel_workers_per_gather ${st.par} ` +
      `(server defaults; the window sort spills to disk once history is deep)`,
  );
  await env.createProject(LISTED_PROJECT);
  await env.createProject(BACKGROUND_PROJECT);
  for (const project of Object.values(BASE_PROJECTS)) await env.createProject(project);
  const setOfRun = await submitRuns(env, runsPlan());
  const listed = [...setOfRun].filter(([, set]) => set === 'listed').map(([id]) => id);
  await prepareHelpers(env, setOfRun);
  const { rows: jobRows } = await env.pool.query<{ job_id: string; gapped: boolean }>(
    `SELECT job_id, gapped FROM bench_jobs WHERE set = 'listed' ORDER BY job_id`,
  );
  const gappedByJob = new Map(jobRows.map((r) => [r.job_id, r.gapped]));
  const listedJobIds = [...gappedByJob.keys()];
  if (listedJobIds.length !== LISTED_RUNS * 4)
    throw new Error(`expected ${LISTED_RUNS * 4} listed jobs, found ${listedJobIds.length}`);
  await growHistory(env, 'background', 0, 1, H_MAX);
  await growHistory(env, 'background', 1, BACKGROUND_H, H_MAX);
  await growHistory(env, 'h1', 0, 1, H_MAX);
  await growHistory(env, 'h10', 0, 1, H_MAX);
  await growHistory(env, 'h10', 1, 10, H_MAX);
  await env.assertInvariants('background history loaded');
  log(
    `   ${setOfRun.size} runs submitted through the API, background history loaded; twins of the listed runs at ` +
      `H=1 and H=10 in ` +
      `${Object.values(BASE_PROJECTS).join(', ')} (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );

  const timed: Timed[] = [];
  const exactLines: string[] = [];
  let prevH = 0;
  for (const h of H_LEVELS) {
    const tLoad = performance.now();
    await growHistory(env, 'listed', prevH, h, H_MAX);
    prevH = h;
    log(
      `\n   H=${h}: history loaded in ${((performance.now() - tLoad) / 1000).toFixed(1)} s; ${await storageFacts(env)}`,
    );
    await env.assertInvariants(`H=${h} loaded`);
    exactLines.push(...(await checkExact(env, h, listed, gappedByJob)));
    log(`   H=${h}: exactness checked for N=${EXACT_NS.join(', ')} (${listedJobIds.length} jobs each)`);
    for (const n of TIMED_NS) {
      const t = await timeLevel(env, h, n, listed);
      timed.push(t);
      log(
        `   H=${h} N=${n}: ours p50 ${fmtMs(t.ours.p50)} ms (H=${n} twin ${fmtMs(t.oursAtN.p50)} ms), window ` +
          `${fmtMs(t.window.p50)} ms, GROUP BY ${fmtMs(t.groupBy.p50)} ms, LATERAL raw ${fmtMs(t.lateral.p50)} ms`,
      );
    }
  }

  printTable(
    `runs-list: exactness (GET /projects/{p}/runs?limit=100&job_submissions_limit=N vs brute force, every job)`,
    ['check'],
    exactLines.map((l) => [l]),
  );

  printTable(
    `runs-list: p50 / p95 ms per list request of ${LISTED_RUNS} runs (${LISTED_RUNS * 4} jobs); ${ITERATIONS} ` +
      `iterations each`,
    [
      'H',
      'N',
      'ours HTTP p50',
      'ours p95',
      'ours, H=N twin p50',
      'window×2 p50',
      'window p95',
      'GROUP BY p50',
      'GROUP BY p95',
      'LATERAL raw p50',
      'rows ours',
      'rows window (1st+2nd)',
      'rows GROUP BY',
      'ours bytes',
    ],
    timed.map((t) => [
      t.h,
      t.n,
      fmtMs(t.ours.p50),
      fmtMs(t.ours.p95),
      fmtMs(t.oursAtN.p50),
      fmtMs(t.window.p50),
      fmtMs(t.window.p95),
      fmtMs(t.groupBy.p50),
      fmtMs(t.groupBy.p95),
      fmtMs(t.lateral.p50),
      fmtInt(t.rowsOurs),
      `${fmtInt(t.rowsWindow[0])}+${fmtInt(t.rowsWindow[1])}`,
      fmtInt(t.rowsGroupBy),
      fmtBytes(t.bytesOurs),
    ]),
    [
      "ours = the whole HTTP request (auth, runs page, job rows, the app's latest-N fetch, JSON), body read " +
        'completely; window/GROUP BY/LATERAL raw = raw SQL through pg on the same database, rows fetched and ' +
        'parsed by pg.',
      `ours, H=N twin = the same request on ${BASE_PROJECTS[1]} (N=1) or ${BASE_PROJECTS[10]} (N=10): as many runs ` +
        `of the same shape whose history stays at H=N, timed in the same loop.`,
      "window×2 = dstack today: row_number() over all columns of every submission of the listed runs' jobs, rn <= " +
        'N, plus the second (termination_reason IS NOT NULL, rn <= 1) query.',
      "GROUP BY = the seed's proposal: max(submission_num) (and latest terminated) per job over every submission, " +
        'then the rows with num > latest - N or = latest terminated.',
      'Row counts: GROUP BY returns FEWER than N per job where numbers have gaps (N > 1), plus the latest ' +
        "terminated row where it falls outside the window (so N=1 returns 2 per job once H ≥ 2); the window's 2nd " +
        'query ' +
        'adds one status row per job.',
      "LATERAL raw = targets.md's third column: LATERAL newest-first per job with LIMIT N, as bare SQL, for " +
        'reference (no target): what the database part of a list costs.',
    ],
  );

  // Ratios and targets.
  const get = (h: number, n: number) =>
    required(
      timed.find((t) => t.h === h && t.n === n),
      `the timings at H=${h} N=${n}`,
    );
  const results: TargetResult[] = [];
  const ratioRows: (string | number)[][] = [];
  const hLabel = QUICK ? `H=${H_MAX} (QUICK: stands in for 1000)` : 'H=1000';
  for (const n of TIMED_NS) {
    const base = get(n === 1 ? 1 : 10, n);
    const top = get(H_MAX, n);
    // Side by side: the listed runs at the deepest H and their H=N twin in one interleaved loop.
    const flat = top.ours.p50 / top.oursAtN.p50;
    const flatPass = flat <= 1.5;
    ratioRows.push([
      `flat, N=${n}: ours p50, H=${H_MAX} / H=${n} twin, same loop`,
      `${fmtMs(top.ours.p50)} / ${fmtMs(top.oursAtN.p50)} ms`,
      fmtRatio(flat),
      '≤ 1.5×',
      verdict(flatPass),
    ]);
    results.push({
      suite: SUITE,
      target: `flat N=${n}: p50(${hLabel}) ≤ 1.5 × p50(H=${n}), side by side`,
      measured: fmtRatio(flat),
      pass: flatPass,
    });
    // For reference, the same runs timed at H=N minutes earlier: includes whatever the machine drifted meanwhile.
    const acrossPhases = top.ours.p50 / base.ours.p50;
    ratioRows.push([
      `(info) flat, N=${n}: H=${H_MAX} / the same runs at H=${base.h}, an earlier phase`,
      `${fmtMs(top.ours.p50)} / ${fmtMs(base.ours.p50)} ms`,
      fmtRatio(acrossPhases),
      '-',
      'info',
    ]);
    const wantWindow = n === 1 ? 20 : 4;
    const wantGroupBy = n === 1 ? 10 : 3;
    const rw = top.window.p50 / top.ours.p50;
    const rg = top.groupBy.p50 / top.ours.p50;
    ratioRows.push([
      `ahead, ${hLabel}, N=${n}: window / ours`,
      `${fmtMs(top.window.p50)} / ${fmtMs(top.ours.p50)} ms`,
      fmtRatio(rw),
      `≥ ${wantWindow}×`,
      verdict(rw >= wantWindow),
    ]);
    ratioRows.push([
      `ahead, ${hLabel}, N=${n}: GROUP BY / ours`,
      `${fmtMs(top.groupBy.p50)} / ${fmtMs(top.ours.p50)} ms`,
      fmtRatio(rg),
      `≥ ${wantGroupBy}×`,
      verdict(rg >= wantGroupBy),
    ]);
    results.push({
      suite: SUITE,
      target: `ahead ${hLabel} N=${n}: window/ours ≥ ${wantWindow}×`,
      measured: fmtRatio(rw),
      pass: rw >= wantWindow,
    });
    results.push({
      suite: SUITE,
      target: `ahead ${hLabel} N=${n}: GROUP BY/ours ≥ ${wantGroupBy}×`,
      measured: fmtRatio(rg),
      pass: rg >= wantGroupBy,
      note:
        n > 1 ? `GROUP BY returned ${fmtInt(top.rowsGroupBy)} rows vs ours ${fmtInt(top.rowsOurs)} (gaps)` : undefined,
    });
  }
  ratioRows.push([
    `exact: N=${EXACT_NS.join(', ')} at every H, vs brute force`,
    `${exactLines.length} checks`,
    '-',
    'all equal',
    'PASS',
  ]);
  results.push({
    suite: SUITE,
    target: `exact: N newest existing submissions, gaps included (N=${EXACT_NS.join(',')}, H=${H_LEVELS.join(',')})`,
    measured: `${exactLines.length}/${exactLines.length} equal`,
    pass: true,
  });

  printTable(
    `runs-list: targets (targets.md, "Runs list"), measured side by side in this run`,
    ['target', 'p50s', 'ratio', 'want', 'verdict'],
    ratioRows,
    [
      'targets.md reference (PG 15, raw SQL, 100 runs): H=300 N=1 window 244 ms, GROUP BY 160 ms, LATERAL 9.7 ms; ' +
        'H=300 N=10 window 267, GROUP BY 215, LATERAL 41 ms.',
    ],
  );
  log(`\n   runs-list finished in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  return results;
}
