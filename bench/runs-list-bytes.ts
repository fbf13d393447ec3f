import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Client, Pool } from 'pg';
import { required } from '../src/common/required';
import { groupBySql, growHistory, ListBenchTarget, prepareHelpers, submitRuns, windowSql } from './runs-list-data';
import { processCpuSeconds, ServerUnderTest } from './server-under-test';
import {
  fmtBytes,
  fmtMs,
  fmtRatio,
  log,
  measureReportedSideBySide,
  median,
  printTable,
  QUICK,
  TargetResult,
} from './support';

/**
 * Issue #19, "Fewer bytes on the list": GET /projects/{p}/runs?limit=100 at H=1000 against a server in a process of
 * its own (the bench's client and baselines never share its event loop, and its CPU is read from /proc), side by
 * side in one sitting:
 * - page bytes with default fields (each job's newest submission with its documents, older ones without) at N=10
 *   against N=1, and what `submission_data=all` / `none` send;
 * - ours at N=10 against dstack's window query (twice) and the GROUP BY proposal, each selecting the columns the page
 *   shows (the documents of each job's newest submission only);
 * - with `Accept-Encoding: gzip` (and br), bytes on the wire and the server's CPU per page against uncompressed.
 */

const SUITE = 'runs-list bytes';
const PROJECT = 'bench-list-bytes';

export interface ListBytesOptions {
  /** Listed runs (× 4 jobs); default 100 (QUICK 20). */
  runs?: number;
  /** Submissions per job; default 1000 (QUICK 50). */
  h?: number;
  /** Timed iterations per contender; default BENCH_ITERATIONS or 20 (QUICK 5). */
  iterations?: number;
}

/** The columns ours shows, from alias `s`; the documents only where `newest` holds (as the default page). */
const shownColumns = (from: string, newest: string) =>
  `${from}.id, ${from}.job_id, ${from}.submission_num, ${from}.status, ${from}.termination_reason,
   ${from}.exit_status, ${from}.submitted_at, ${from}.started_at, ${from}.finished_at,
   CASE WHEN ${newest} THEN ${from}.provisioning_data END AS provisioning_data,
   CASE WHEN ${newest} THEN ${from}.runtime_data END AS runtime_data`;
/** dstack today, selecting what the page shows: row_number() over every submission, rn <= N, run twice. */
const WINDOW_SQL = (onlyTerminated: boolean) =>
  windowSql(onlyTerminated, {
    inner: `s.id, s.job_id, s.run_id, s.submission_num, s.status, s.termination_reason, s.exit_status,
           s.submitted_at, s.started_at, s.finished_at, s.provisioning_data, s.runtime_data`,
    outer: shownColumns('x', 'x.rn = 1'),
  });
/** The seed's GROUP BY proposal, selecting what the page shows. */
const GROUP_BY_SQL = groupBySql(shownColumns('s', 's.submission_num = l.latest'));

/** One GET read to its end over a keep-alive connection: bytes on the wire and the encoding the server chose. */
function fetchPage(
  server: ServerUnderTest,
  agent: Agent,
  path: string,
  encoding = 'identity',
): Promise<{ bytes: number; body: Buffer; encoding: string }> {
  return new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${server.token}`, 'accept-encoding': encoding };
    const req = request(server.baseUrl + path, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        if (res.statusCode !== 200)
          return reject(new Error(`GET ${path} → ${res.statusCode}: ${body.toString('utf8', 0, 500)}`));
        resolve({ bytes: body.length, body, encoding: String(res.headers['content-encoding'] ?? 'identity') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

interface PageJob {
  job_submissions: Record<string, unknown>[];
  latest_job_submission: Record<string, unknown> | null;
}

/** Throws unless the default page has what the contract says: documents on each job's newest submission only. */
function checkDefaultPage(page: { items: { jobs: PageJob[] }[] }, runs: number, n: number): void {
  const problems: string[] = [];
  if (page.items.length !== runs) problems.push(`${page.items.length} runs listed, expected ${runs}`);
  for (const job of page.items.flatMap((r) => r.jobs)) {
    const shown = job.job_submissions;
    if (shown.length !== n) problems.push(`a job shows ${shown.length} submissions, expected ${n}`);
    shown.forEach((s, i) => {
      if ('runtime_data' in s !== (i === shown.length - 1))
        problems.push(`submission ${String(s.submission_num)} ${i === shown.length - 1 ? 'lacks' : 'has'} documents`);
    });
    if (!job.latest_job_submission || 'runtime_data' in job.latest_job_submission)
      problems.push('latest_job_submission repeats the documents');
  }
  if (problems.length > 0) throw new Error(`${SUITE}: the default page is wrong: ${problems.slice(0, 5).join('; ')}`);
}

/**
 * Loads `runs` runs × 4 jobs with H submissions each into `server`'s database (which gets the bench's helper tables:
 * a server of its own), then measures as described above. Callable from another suite with a server it started.
 */
export async function runListBytes(server: ServerUnderTest, options: ListBytesOptions = {}): Promise<TargetResult[]> {
  const runs = options.runs ?? (QUICK ? 20 : 100);
  const h = options.h ?? (QUICK ? 50 : 1000);
  const iterations = options.iterations ?? (Number(process.env.BENCH_ITERATIONS) || (QUICK ? 5 : 20));
  const pool = new Pool({ connectionString: server.databaseUrl, max: 4, application_name: 'runplane-bench' });
  const agent = new Agent({ keepAlive: true });
  try {
    const t0 = performance.now();
    const target: ListBenchTarget = { http: (m, p, b, e) => server.http(m, p, b, e), pool };
    await server.createProject(PROJECT);
    const setOfRun = await submitRuns(
      target,
      Array.from({ length: runs }, () => ({ project: PROJECT, set: 'listed' as const })),
    );
    await prepareHelpers(target, setOfRun);
    await growHistory(target, 'listed', 0, 1, h);
    await growHistory(target, 'listed', 1, h, h);
    const mismatches = await server.invariantMismatches();
    if (mismatches.length > 0)
      throw new Error(`${SUITE}: invariants after loading: ${mismatches.slice(0, 3).join('; ')}`);
    const runIds = [...setOfRun.keys()];
    log(
      `\n## ${SUITE}: ${runs} runs × 4 jobs at H=${h} on a server in its own process (pid ${server.pid}), loaded in ` +
        `${((performance.now() - t0) / 1000).toFixed(0)} s`,
    );

    const path = (n: number, data?: string) =>
      `/api/v1/projects/${PROJECT}/runs?limit=100&job_submissions_limit=${n}${data ? `&submission_data=${data}` : ''}`;
    // Bytes, and the contract checked once before anything is timed.
    const ten = await fetchPage(server, agent, path(10));
    checkDefaultPage(JSON.parse(ten.body.toString('utf8')), runs, 10);
    const gzipped = async (p: string) => (await fetchPage(server, agent, p, 'gzip')).bytes;
    const bytes = {
      one: (await fetchPage(server, agent, path(1))).bytes,
      ten: ten.bytes,
      all: (await fetchPage(server, agent, path(10, 'all'))).bytes,
      none: (await fetchPage(server, agent, path(10, 'none'))).bytes,
      gzip: { one: await gzipped(path(1)), ten: await gzipped(path(10)), all: await gzipped(path(10, 'all')) },
    };

    // Ours against the baselines, interleaved.
    const window = async () => {
      await pool.query(WINDOW_SQL(false), [runIds, 10]);
      await pool.query(WINDOW_SQL(true), [runIds, 1]);
    };
    const groupBy = () => pool.query(GROUP_BY_SQL, [runIds, 10]);
    const ours = () => fetchPage(server, agent, path(10));
    // Each call timed alone, and the CPU it cost counted around it (the server's process and the PostgreSQL
    // backends of its database): on a machine shared with other work, time ratios move with its load.
    const meter = await cpuMeter(server);
    const cpu = { ours: [] as number[], window: [] as number[], groupBy: [] as number[] };
    const metered = (k: keyof typeof cpu, fn: () => Promise<unknown>) => async () => {
      const before = await meter.sample();
      const started = performance.now();
      await fn();
      const ms = performance.now() - started;
      cpu[k].push(meter.msSince(before, await meter.sample()));
      return ms;
    };
    let timed: Record<keyof typeof cpu, { p50: number; p95: number }>;
    try {
      timed = await measureReportedSideBySide(
        { ours: metered('ours', ours), window: metered('window', window), groupBy: metered('groupBy', groupBy) },
        iterations,
        QUICK ? 1 : 3,
      );
    } finally {
      await meter.close();
    }
    const cpuMs = { ours: median(cpu.ours), window: median(cpu.window), groupBy: median(cpu.groupBy) };

    // Compression: batches of pages per encoding, alternated; the server's CPU per page over each batch.
    const encodings = ['identity', 'gzip', 'br'] as const;
    const batch = QUICK ? 5 : 10;
    const wire = new Map(encodings.map((e) => [e, { bytes: 0, used: '', cpuMs: [] as number[], ms: [] as number[] }]));
    for (const e of encodings) await fetchPage(server, agent, path(10), e); // warm-up
    for (let round = 0; round < (QUICK ? 2 : 5); round++) {
      for (const e of round % 2 === 0 ? encodings : [...encodings].reverse()) {
        const w = required(wire.get(e), e);
        const cpu0 = server.cpuSeconds();
        for (let i = 0; i < batch; i++) {
          const started = performance.now();
          const got = await fetchPage(server, agent, path(10), e);
          w.ms.push(performance.now() - started);
          w.bytes = got.bytes;
          w.used = got.encoding;
        }
        w.cpuMs.push(((server.cpuSeconds() - cpu0) * 1000) / batch);
      }
    }
    const wireRows = [...wire].map(([accepted, w]) => ({ accepted, ...w }));
    return report({ runs, h, iterations, bytes, timed, cpuMs, wire: wireRows });
  } finally {
    agent.destroy();
    await pool.end();
  }
}

interface Figures {
  runs: number;
  h: number;
  iterations: number;
  bytes: { one: number; ten: number; all: number; none: number; gzip: { one: number; ten: number; all: number } };
  timed: Record<'ours' | 'window' | 'groupBy', { p50: number; p95: number }>;
  /** Median CPU per call: the server's and its database's backends' (ours), the backends' (the baselines). */
  cpuMs: Record<'ours' | 'window' | 'groupBy', number>;
  wire: { accepted: string; bytes: number; used: string; cpuMs: number[]; ms: number[] }[];
}

function report(f: Figures): TargetResult[] {
  const hLabel = QUICK ? `H=${f.h} (QUICK)` : `H=${f.h}`;
  printTable(
    `${SUITE}: page bytes, ${f.runs} runs × 4 jobs, ${hLabel}`,
    ['page', 'bytes', 'vs N=1', 'gzip', 'vs N=1, gzip'],
    [
      ['N=1, default fields', fmtBytes(f.bytes.one), fmtRatio(1), fmtBytes(f.bytes.gzip.one), fmtRatio(1)],
      [
        'N=10, default fields (documents on each job’s newest)',
        fmtBytes(f.bytes.ten),
        fmtRatio(f.bytes.ten / f.bytes.one),
        fmtBytes(f.bytes.gzip.ten),
        fmtRatio(f.bytes.gzip.ten / f.bytes.gzip.one),
      ],
      [
        'N=10, submission_data=all',
        fmtBytes(f.bytes.all),
        fmtRatio(f.bytes.all / f.bytes.one),
        fmtBytes(f.bytes.gzip.all),
        fmtRatio(f.bytes.gzip.all / f.bytes.gzip.one),
      ],
      ['N=10, submission_data=none', fmtBytes(f.bytes.none), fmtRatio(f.bytes.none / f.bytes.one), '-', '-'],
    ],
  );
  const { ours, window, groupBy } = f.timed;
  const c = f.cpuMs;
  printTable(
    `${SUITE}: N=10 default fields, p50 / p95 ms over ${f.iterations} interleaved iterations`,
    ['contender', 'p50', 'p95', 'vs ours', 'CPU ms/call', 'vs ours'],
    [
      ['ours: GET over HTTP, body read', fmtMs(ours.p50), fmtMs(ours.p95), fmtRatio(1), fmtMs(c.ours), fmtRatio(1)],
      ...(
        [
          ['window query ×2, same columns', window, c.window],
          ['GROUP BY, same columns', groupBy, c.groupBy],
        ] as const
      ).map(([label, t, ms]) => [
        label,
        fmtMs(t.p50),
        fmtMs(t.p95),
        fmtRatio(t.p50 / ours.p50),
        fmtMs(ms),
        fmtRatio(ms / c.ours),
      ]),
    ],
    [
      'baselines: raw SQL through pg from the bench process, selecting the documents of each job’s newest row only',
      'CPU per call (median): the server process and every PostgreSQL backend of its database (ours), the ' +
        'backends (baselines); /proc, 10 ms ticks per process',
    ],
  );
  const base = required(
    f.wire.find((w) => w.accepted === 'identity'),
    'identity',
  );
  const cpu = (w: Figures['wire'][number]) => median(w.cpuMs);
  printTable(
    `${SUITE}: N=10 default page by Accept-Encoding (batches alternated; medians)`,
    ['accepted', 'sent', 'bytes on the wire', 'vs identity', 'server CPU ms/page', 'vs identity', 'p50 ms'],
    f.wire.map((w) => [
      w.accepted,
      w.used,
      fmtBytes(w.bytes),
      fmtRatio(w.bytes / base.bytes),
      cpu(w).toFixed(1),
      fmtRatio(cpu(w) / cpu(base)),
      fmtMs(median(w.ms)),
    ]),
    ['server CPU: user + system of its process over each batch (/proc, 10 ms ticks), divided by the batch'],
  );
  const gzip = required(
    f.wire.find((w) => w.accepted === 'gzip'),
    'gzip',
  );
  const br = required(
    f.wire.find((w) => w.accepted === 'br'),
    'br',
  );
  const bytesRatio = f.bytes.ten / f.bytes.one;
  const rw = window.p50 / ours.p50;
  const rg = groupBy.p50 / ours.p50;
  return [
    {
      suite: SUITE,
      target: `${hLabel} N=10 default fields: page bytes ≤ 1.5× the N=1 page`,
      measured: `${fmtBytes(f.bytes.ten)} / ${fmtBytes(f.bytes.one)} = ${fmtRatio(bytesRatio)}`,
      pass: bytesRatio <= 1.5,
      note:
        `on the wire with gzip ${fmtRatio(f.bytes.gzip.ten / f.bytes.gzip.one)}; ` +
        `submission_data=all ${fmtBytes(f.bytes.all)}`,
    },
    {
      suite: SUITE,
      target: `${hLabel} N=10: ≥ 10× faster than the window query (same columns)`,
      measured: `${fmtMs(window.p50)} / ${fmtMs(ours.p50)} ms = ${fmtRatio(rw)}`,
      pass: rw >= 10,
      note: `CPU per call ${fmtRatio(c.window / c.ours)}`,
    },
    {
      suite: SUITE,
      target: `${hLabel} N=10: ≥ 6× faster than the GROUP BY query (same columns)`,
      measured: `${fmtMs(groupBy.p50)} / ${fmtMs(ours.p50)} ms = ${fmtRatio(rg)}`,
      pass: rg >= 6,
      note: `CPU per call ${fmtRatio(c.groupBy / c.ours)}`,
    },
    {
      suite: SUITE,
      target: `${hLabel} N=10, Accept-Encoding: gzip: bytes on the wire and server CPU per page vs uncompressed`,
      measured:
        `${fmtBytes(gzip.bytes)} (${fmtRatio(gzip.bytes / base.bytes)}), ` +
        `${cpu(gzip).toFixed(1)} vs ${cpu(base).toFixed(1)} ms CPU (${fmtRatio(cpu(gzip) / cpu(base))})`,
      pass: gzip.used === 'gzip' && gzip.bytes < base.bytes,
      note: `reported, no bound; br: ${fmtBytes(br.bytes)}, ${cpu(br).toFixed(1)} ms CPU`,
    },
  ];
}

/**
 * CPU seconds of the server's process and of every PostgreSQL backend of its database but the meter's own, sampled
 * per process so that backends come and go between two samples without harm (a new one counts from 0).
 */
async function cpuMeter(server: ServerUnderTest) {
  const client = new Client({ connectionString: server.databaseUrl, application_name: 'runplane-bench-meter' });
  await client.connect();
  type Sample = Map<number, number>;
  return {
    sample: async (): Promise<Sample> => {
      const { rows } = await client.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
      );
      return new Map([
        [server.pid, server.cpuSeconds()],
        ...rows.map((r): [number, number] => [r.pid, processCpuSeconds(r.pid)]),
      ]);
    },
    msSince: (before: Sample, after: Sample): number => {
      let seconds = 0;
      for (const [pid, s] of after) seconds += s - (before.get(pid) ?? 0);
      return seconds * 1000;
    },
    close: () => client.end(),
  };
}
