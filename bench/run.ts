import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { runBigRun } from './big-run';
import { runBilling } from './billing';
import { runBoundedPage } from './bounded-page';
import { runCli } from './cli';
import { runCompression } from './compression';
import { runConsole } from './console';
import { runDag } from './dag';
import { runInstances } from './instances';
import { runJobGroups } from './job-groups';
import { runLifecycle } from './lifecycle';
import { runReports } from './reports';
import { runRunsList } from './runs-list';
import { runThroughput } from './throughput';
import { runWorker, WORKER_BENCH_ENV } from './worker';
import {
  ADMIN_URL,
  BenchEnv,
  isInterrupted,
  log,
  printTable,
  QUICK,
  TargetResult,
  verdict,
  withBenchEnv,
} from './support';

/**
 * `npm run bench [-- <suite> ...]`: each suite in its own fresh database with the real app in-process, then a
 * summary of every target. Exit 0 when every selected suite ran to the end (a MISS is a result, not a crash);
 * 1 when a suite failed (an exactness mismatch, an unexpected response); 2 on a bad argument.
 */
const SUITES: Record<string, (env: BenchEnv) => Promise<TargetResult[]>> = {
  'runs-list': runRunsList,
  'job-groups': runJobGroups,
  lifecycle: runLifecycle,
  reports: runReports,
  dag: runDag,
  billing: runBilling,
  'bounded-page': runBoundedPage,
  worker: runWorker,
  cli: runCli,
  compression: runCompression,
  console: runConsole,
  instances: runInstances,
  throughput: runThroughput,
  'big-run': runBigRun,
};
/** Server settings a suite needs, set while its app starts and restored after it. */
const SUITE_ENV: Record<string, Record<string, string>> = { worker: WORKER_BENCH_ENV };

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a) => a !== '--');
  if (args.includes('--help') || args.includes('-h')) {
    log(
      `usage: npm run bench [-- ${Object.keys(SUITES).join(' | ')} ...]   (default: all)\n` +
        '  env: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), ' +
        'BENCH_QUICK=1 (small shapes, to check the scripts), BENCH_ITERATIONS (timed iterations),\n' +
        '       BENCH_H_LEVELS (runs-list history levels, default 1,10,100,1000), ' +
        'BENCH_EXPLAIN=1 (runs-list: EXPLAIN ANALYZE of the SQL contenders at the deepest H),\n' +
        '       BENCH_RUNS_LIST_PARTS (levels,bytes: the history levels, issue #19 page bytes on a server of its own)',
    );
    return 0;
  }
  const unknown = args.filter((a) => !(a in SUITES));
  if (unknown.length > 0) {
    process.stderr.write(`unknown suite(s): ${unknown.join(', ')}; known: ${Object.keys(SUITES).join(', ')}\n`);
    return 2;
  }
  const selected = args.length > 0 ? args : Object.keys(SUITES);
  const server = new URL(ADMIN_URL);
  log(
    `runplane bench: ${selected.join(', ')} on PostgreSQL at ` +
      `${server.host}${QUICK ? ' (BENCH_QUICK=1: small shapes, figures NOT meaningful)' : ''}; node ${process.version}`,
  );

  const t0 = performance.now();
  const results: TargetResult[] = [];
  const failures: string[] = [];
  for (const name of selected) {
    try {
      results.push(...(await withSuiteEnv(SUITE_ENV[name] ?? {}, () => withBenchEnv(name, SUITES[name]))));
    } catch (err) {
      if (isInterrupted()) return new Promise<number>(() => undefined); // the signal handler exits once cleaned up
      const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
      failures.push(`${name}: ${err instanceof Error ? err.message : String(err)}`);
      process.stderr.write(`\n!!! bench suite ${name} FAILED !!!\n${message}\n`);
    }
  }

  printTable(
    `summary: targets (targets.md), each a ratio or bound measured side by side in this run`,
    ['suite', 'target', 'measured', 'verdict', 'note'],
    results.map((r) => [r.suite, r.target, r.measured, verdict(r.pass), r.note ?? '']),
    [
      ...failures.map((f) => `FAILED: ${f}`),
      `${results.filter((r) => r.pass).length}/${results.length} targets met; total ` +
        `${((performance.now() - t0) / 1000 / 60).toFixed(1)} min`,
    ],
  );
  return failures.length > 0 ? 1 : 0;
}

async function withSuiteEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) Reflect.deleteProperty(process.env, k);
      else process.env[k] = v;
    }
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Everything is closed by now; if some handle still keeps the loop alive, say so and leave anyway.
    setTimeout(() => {
      process.stderr.write('bench: a handle was still open after clean-up; exiting anyway\n');
      process.exit(code);
    }, 10_000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
