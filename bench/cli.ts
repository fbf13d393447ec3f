import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { BenchEnv, fmtMs, fmtRatio, log, measureSideBySide, printTable, QUICK, TargetResult, verdict } from './support';

/**
 * CLI start-up (issue 15, "Figures"): `runplane --help` and `runplane ps --json` (the built binary, a new process
 * each time) against `node -e 0` and a new node process making the request `ps` makes, all side by side. Target:
 * each median ≤ 2 × its baseline. The server is the bench's in-process app over a project holding a few runs.
 */

const SUITE = 'cli';
const ITERATIONS = Number(process.env.BENCH_ITERATIONS) || (QUICK ? 5 : 20);
const CLI = join(__dirname, '..', 'src', 'cli.js');

function run(args: string[], env: Record<string, string>): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env } }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
}

export async function runCli(env: BenchEnv): Promise<TargetResult[]> {
  const project = await env.createProject('cli-bench');
  for (let i = 0; i < 5; i++)
    await env.http('POST', `/api/v1/projects/${project}/runs`, {
      run_name: `bench-${i}`,
      jobs: [{ spec: { commands: ['true'], resources: { cpu: 1, memory_mib: 128 } } }],
    });
  const cliEnv = {
    RUNPLANE_URL: env.baseUrl,
    RUNPLANE_TOKEN: env.token,
    RUNPLANE_PROJECT: project,
    RUNPLANE_CONFIG: join(__dirname, 'no-such-config.json'),
  };
  const listPath = `/api/v1/projects/${project}/runs?limit=20&include_jobs=false&only_active=true`;
  const s = await measureSideBySide(
    {
      node: () => run(['-e', '0'], {}),
      // node -e 0 plus the HTTP request: a new process making the same request with Node's fetch (what the CLI's
      // typed client uses), so that loading an HTTP client counts on both sides.
      request: () =>
        run(
          [
            '-e',
            `fetch(${JSON.stringify(env.baseUrl + listPath)}, {headers: ${JSON.stringify(env.auth)}})` +
              '.then((r) => r.text())',
          ],
          {},
        ),
      help: () => run([CLI, '--help'], cliEnv),
      ps: () => run([CLI, 'ps', '--json'], cliEnv),
    },
    ITERATIONS,
  );
  const help = s.help.p50 / s.node.p50;
  const ps = s.ps.p50 / s.request.p50;
  printTable(
    `${SUITE}: median wall time of a new process (${ITERATIONS} rounds, side by side)`,
    ['contender', 'p50 ms', 'p95 ms'],
    (['node', 'request', 'help', 'ps'] as const).map((k) => [
      { node: 'node -e 0', request: 'node -e "fetch(GET runs)"', help: 'runplane --help', ps: 'runplane ps --json' }[k],
      fmtMs(s[k].p50),
      fmtMs(s[k].p95),
    ]),
  );
  log(
    `${SUITE}: help/node ${fmtRatio(help)}, ps/(node + the request) ${fmtRatio(ps)}: ` + verdict(help <= 2 && ps <= 2),
  );
  return [
    { suite: SUITE, target: 'runplane --help ≤ 2× node -e 0', measured: fmtRatio(help), pass: help <= 2 },
    {
      suite: SUITE,
      target: 'runplane ps --json ≤ 2× node -e fetch(the same request)',
      measured: fmtRatio(ps),
      pass: ps <= 2,
    },
  ];
}
