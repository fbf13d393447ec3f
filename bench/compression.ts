import { request as httpRequest, Agent } from 'node:http';
import { performance } from 'node:perf_hooks';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import { BROTLI_QUALITY, GZIP_LEVEL } from '../src/common/http/compress-json';
import { bigJobSpec } from './runs-list-data';
import { BenchEnv, fmtBytes, fmtInt, fmtRatio, log, median, printTable, QUICK, TargetResult } from './support';

const RUNS = QUICK ? 20 : 100;
const JOBS_PER_RUN = 4;
const ITERATIONS = QUICK ? 5 : 30;

/** One GET of `path` with `encoding` accepted: the bytes on the wire and the encoding the server chose. */
function fetchWire(
  env: BenchEnv,
  agent: Agent,
  path: string,
  encoding: string,
): Promise<{ bytes: number; body: Buffer; used: string }> {
  return new Promise((resolve, reject) => {
    const headers = { ...env.auth, 'accept-encoding': encoding };
    const req = httpRequest(env.baseUrl + path, { agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${path} → ${res.statusCode}`));
        const body = Buffer.concat(chunks);
        resolve({ bytes: body.length, body, used: String(res.headers['content-encoding'] ?? 'identity') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Response compression on a runs-list page (100 runs × 4 jobs of ~3 KB specs, default fields): how each gzip level
 * and brotli quality trades bytes for CPU on that very page (what chose the levels in
 * src/common/http/compress-json.ts), then the page over HTTP uncompressed, gzip and brotli: bytes on the wire and the
 * process's CPU per page (server and the raw client together: the client only reads bytes).
 */
export async function runCompression(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject(`bench-compression-${process.pid}`);
  for (let r = 0; r < RUNS; r++)
    await env.http('POST', `/api/v1/projects/${project}/runs`, {
      jobs: Array.from({ length: JOBS_PER_RUN }, (_, j) => ({ spec: bigJobSpec(r * JOBS_PER_RUN + j) })),
    });
  const path = `/api/v1/projects/${project}/runs?limit=100`;
  const agent = new Agent({ keepAlive: true });
  const page = (await fetchWire(env, agent, path, 'identity')).body;
  log(`compression: a page of ${fmtInt(RUNS)} runs × ${JOBS_PER_RUN} jobs, ${fmtBytes(page.length)} of JSON`);

  const timeCompress = (fn: () => Buffer) => {
    let bytes = 0;
    const ms: number[] = [];
    for (let i = 0; i < ITERATIONS; i++) {
      const t0 = performance.now();
      bytes = fn().length;
      ms.push(performance.now() - t0);
    }
    return { bytes, ms: median(ms) };
  };
  const levels: [string, () => Buffer][] = [
    ...[1, 4, 6, 9].map((l): [string, () => Buffer] => [`gzip level ${l}`, () => gzipSync(page, { level: l })]),
    ...[1, 4, 5, 6, 9].map((q): [string, () => Buffer] => [
      `brotli quality ${q}`,
      () => brotliCompressSync(page, { params: { [constants.BROTLI_PARAM_QUALITY]: q } }),
    ]),
  ];
  const rows: (string | number)[][] = [];
  for (const [name, fn] of levels) {
    const { bytes, ms } = timeCompress(fn);
    rows.push([name, fmtBytes(bytes), fmtRatio(page.length / bytes), ms.toFixed(2)]);
  }
  printTable(
    `compression: one page compressed in process (median of ${ITERATIONS})`,
    ['codec', 'bytes', 'smaller by', 'ms'],
    rows,
    [`chosen: gzip level ${GZIP_LEVEL}, brotli quality ${BROTLI_QUALITY}`],
  );

  const wire: (string | number)[][] = [];
  const results: Record<string, { bytes: number; cpuMs: number; wallMs: number; used: string }> = {};
  for (const encoding of ['identity', 'gzip', 'br']) await fetchWire(env, agent, path, encoding);
  // Alternated, so drift spreads over all three.
  const samples: Record<string, { cpu: number[]; wall: number[]; bytes: number; used: string }> = {};
  for (let i = 0; i < ITERATIONS; i++)
    for (const encoding of ['identity', 'gzip', 'br']) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const got = await fetchWire(env, agent, path, encoding);
      const wall = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const s = (samples[encoding] ??= { cpu: [], wall: [], bytes: got.bytes, used: got.used });
      s.cpu.push((cpu.user + cpu.system) / 1000);
      s.wall.push(wall);
    }
  for (const [encoding, s] of Object.entries(samples)) {
    results[encoding] = { bytes: s.bytes, cpuMs: median(s.cpu), wallMs: median(s.wall), used: s.used };
  }
  const base = results.identity;
  for (const [encoding, r] of Object.entries(results))
    wire.push([
      encoding,
      r.used,
      fmtBytes(r.bytes),
      fmtRatio(r.bytes / base.bytes),
      r.cpuMs.toFixed(1),
      fmtRatio(r.cpuMs / base.cpuMs),
      r.wallMs.toFixed(1),
    ]);
  printTable(
    `compression: the page over HTTP, alternated (median of ${ITERATIONS})`,
    ['accepted', 'sent', 'bytes on the wire', 'vs identity', 'CPU ms/page', 'vs identity', 'p50 ms'],
    wire,
  );
  return [
    {
      suite: 'compression',
      target: 'runs-list page with Accept-Encoding: gzip, bytes and CPU against uncompressed (reported)',
      measured: `${fmtRatio(results.gzip.bytes / base.bytes)} bytes, ${fmtRatio(results.gzip.cpuMs / base.cpuMs)} CPU`,
      pass: results.gzip.used === 'gzip' && results.br.used === 'br' && results.gzip.bytes < base.bytes,
    },
  ];
}
