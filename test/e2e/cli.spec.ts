import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RUN_FILE_SCHEMA } from '../../src/modules/run-files/run-file.schema';
import { runplane, runplaneOnTerminal, spawnRunplane, type CliResult, type RunningCli } from '../support/cli-process';
import { waitFor } from '../support/runplane-worker';
import { startServer, type ServerProcess } from '../support/server-process';
import { workerDatabaseUrl } from '../support/test-databases';

/** A port nothing listens on (one just closed). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

const ADMIN_TOKEN = 'rp_test_admin_token_cli_0123456789abcdef';
/** Each command is a new node process: on a loaded machine each takes seconds, and a test runs dozens. */
const SLOW = 180_000;

/** Money and ages vary from run to run: masked, and column padding squeezed (the exact tables: cli-output.spec). */
// Ages (`5s`, `3h`) only as whole words between spaces: a UUID segment such as `-123d-` is not one.
const squash = (text: string) =>
  text
    .replace(/<?\$[\d.,]+/g, '$C')
    .replace(/(?<=^| )\d+[smhd](?= |$)/gm, 'T')
    .replace(/ +/g, ' ');

const RUN_FILE = `name: tour-1
resources: {cpu: 0.1, memory: 128MB}
env: {GREETING: hello}
groups:
  - name: prep
    jobs:
      - name: download
        commands: [echo downloading]
  - name: sweep
    groups:
      - name: small
        jobs:
          - name: train
            replicas: 2
            commands: ["echo train $RUNPLANE_REPLICA_NUM", "echo $GREETING >&2"]
jobs:
  - name: report
    commands: [echo report]
`;

/**
 * The runplane CLI, the built binary run as a process, against a live server (`runplane serve` with its embedded
 * worker) on PostgreSQL: every command, its exit codes, the config file, and no token ever in any output.
 */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('the runplane CLI against a live server', () => {
  let dir: string;
  let server: ServerProcess;
  let env: Record<string, string>;
  const outputs: string[] = [];
  const secrets = [ADMIN_TOKEN];
  const cli = async (args: string[], input?: string, over: Record<string, string> = {}): Promise<CliResult> => {
    const r = await runplane({ ...env, ...over }, args, input);
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  const spawned: RunningCli[] = [];
  const start = (args: string[]) => {
    const p = spawnRunplane(env, args);
    spawned.push(p);
    return p;
  };
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-cli-'));
    server = await startServer({
      DATABASE_URL: await workerDatabaseUrl('cli'),
      DATABASE_EMBEDDED: process.env.RUNPLANE_TEST_EMBEDDED === '1' ? 'true' : 'false',
      RUNPLANE_DATA_DIR: join(dir, 'data'),
      RUNPLANE_ADMIN_TOKEN: ADMIN_TOKEN,
    });
    env = { HOME: dir, RUNPLANE_CONFIG: join(dir, 'config', 'runplane.json') };
  }, 60_000);

  afterAll(async () => {
    for (const p of spawned) if (p.child.exitCode === null) p.child.kill('SIGKILL');
    await server?.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    // Whatever any command printed, on either stream: never a token.
    for (const out of outputs) for (const s of secrets) expect(out).not.toContain(s);
  }, 60_000);

  it(
    'prints help with examples for each command, and refuses bad usage or no credentials with exit 2',
    async () => {
      const top = await cli(['--help']);
      expect(top.code).toBe(0);
      const commands = ['login', 'apply', 'ps', 'logs', 'stop', 'cancel', 'groups', 'cost', 'billing', 'projects'];
      for (const c of [...commands, 'users', 'tokens']) {
        expect(top.stdout).toContain(`\n  ${c}`);
        const help = await cli([c, '--help']);
        expect(help.code).toBe(0);
        expect(help.stdout).toMatch(new RegExp(`^usage: runplane ${c}`));
        expect(help.stdout).toContain(`Examples:\n  runplane ${c}`);
        expect(help.stdout).toContain('Exit codes: 0 ok');
      }
      const bad = await cli(['ps', '--bogus']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toBe(
        "runplane ps: Unknown option '--bogus'\nusage: runplane ps [RUN] [-a] [-w] [-n N] [--project NAME] " +
          '(runplane ps --help)\n',
      );
      const none = await cli(['ps']);
      expect(none.code).toBe(2);
      expect(none.stderr).toBe(
        'runplane ps: no server: run runplane login --url URL --token TOKEN, or set RUNPLANE_URL\n',
      );
    },
    SLOW,
  );

  it(
    'logs in with the token on stdin (config 0600); env overrides it; bad tokens, a down server',
    async () => {
      const login = await cli(['login', '--url', server.url], `${ADMIN_TOKEN}\n`);
      expect(login.code).toBe(0);
      expect(login.stdout).toBe(
        `logged in to ${server.url} as admin (admin)\nsaved in ${env.RUNPLANE_CONFIG} (mode 0600)\n`,
      );
      expect(statSync(env.RUNPLANE_CONFIG).mode & 0o777).toBe(0o600);
      expect(statSync(join(dir, 'config')).mode & 0o777).toBe(0o700);
      expect(JSON.parse(readFileSync(env.RUNPLANE_CONFIG, 'utf8'))).toEqual({ url: server.url, token: ADMIN_TOKEN });

      expect((await cli(['projects', 'create', 'demo'])).stdout).toBe('created project demo\n');
      const again = await cli(['login', '--url', server.url, '--token', ADMIN_TOKEN, '--project', 'demo', '--json']);
      expect(JSON.parse(again.stdout)).toMatchObject({ url: server.url, project: 'demo', user: { name: 'admin' } });
      expect(statSync(env.RUNPLANE_CONFIG).mode & 0o777).toBe(0o600);
      // The project alone: the stored URL and token are kept.
      expect((await cli(['login', '--project', 'demo'])).stdout).toContain(`logged in to ${server.url} as admin`);
      expect(JSON.parse(readFileSync(env.RUNPLANE_CONFIG, 'utf8'))).toEqual({
        url: server.url,
        token: ADMIN_TOKEN,
        project: 'demo',
      });

      const wrong = 'rp_not_a_real_token_0123456789abcdef';
      secrets.push(wrong);
      const refused = await cli(['login', '--url', server.url, '--token', wrong]);
      expect(refused.code).toBe(4);
      expect(refused.stderr).toMatch(
        /^runplane login: [^\n]+ \(UNAUTHENTICATED\): run runplane login with a valid token/,
      );
      expect(refused.stderr.split('\n')).toHaveLength(2);
      const badEnv = await cli(['ps'], undefined, { RUNPLANE_TOKEN: wrong });
      expect(badEnv.code).toBe(4);
      expect(badEnv.stderr).toContain('(UNAUTHENTICATED)');

      const closed = await freePort();
      const down = await cli(['ps'], undefined, { RUNPLANE_URL: `http://127.0.0.1:${closed}` });
      expect(down.code).toBe(5);
      expect(down.stderr).toBe(
        `runplane ps: cannot reach the server at http://127.0.0.1:${closed} (connection refused): is it running? ` +
          '(runplane login --url, or RUNPLANE_URL, sets where)\n',
      );
      // The environment alone, no config file: what CI uses.
      const envOnly = await cli(['projects', '--json'], undefined, {
        RUNPLANE_CONFIG: join(dir, 'none.json'),
        RUNPLANE_URL: server.url,
        RUNPLANE_TOKEN: ADMIN_TOKEN,
      });
      expect(envOnly.code).toBe(0);
      expect((JSON.parse(envOnly.stdout) as { name: string }[]).map((p) => p.name)).toEqual(['demo']);
    },
    SLOW,
  );

  it(
    'lists projects, users and tokens; new secrets go to 0600 files only',
    async () => {
      expect(squash((await cli(['projects'])).stdout)).toBe('PROJECT MEMBERS BILLING LIMIT CREATED\ndemo 1 none T\n');
      expect(squash((await cli(['projects', 'show', 'demo'])).stdout)).toMatch(
        /^project demo, billing limit none, created \S+\n\nMEMBER ROLE\nadmin admin\n$/,
      );
      expect(squash((await cli(['users'])).stdout)).toMatch(/^USER ROLE ID CREATED\nadmin admin [0-9a-f-]{36} T\n$/);

      const aliceFile = join(dir, 'alice.token');
      const alice = await cli(['users', 'create', 'alice', '--token-file', aliceFile]);
      expect(alice.stdout).toBe(`created user alice (user); token written to ${aliceFile} (mode 0600)\n`);
      expect(statSync(aliceFile).mode & 0o777).toBe(0o600);
      const aliceToken = readFileSync(aliceFile, 'utf8').trim();
      secrets.push(aliceToken);
      const aliceMe = await cli(['users', '--json'], undefined, { RUNPLANE_TOKEN: aliceToken });
      expect(JSON.parse(aliceMe.stdout)).toMatchObject({ name: 'alice', global_role: 'user' });

      expect((await cli(['tokens', 'create'])).code).toBe(2);
      const tokenFile = join(dir, 'ci.token');
      const created = await cli(['tokens', 'create', '--token-file', tokenFile, '--json']);
      const { id } = JSON.parse(created.stdout) as { id: string };
      expect(JSON.parse(created.stdout)).not.toHaveProperty('token');
      const ciToken = readFileSync(tokenFile, 'utf8').trim();
      secrets.push(ciToken);
      expect(statSync(tokenFile).mode & 0o777).toBe(0o600);
      const list = await cli(['tokens', '--json']);
      expect((JSON.parse(list.stdout) as { id: string }[]).map((t) => t.id)).toContain(id);
      expect((await cli(['tokens'])).stdout).toMatch(new RegExp(`^TOKEN ID +CREATED\n(.*\n)*${id} `));
      expect((await cli(['users'], undefined, { RUNPLANE_TOKEN: ciToken })).code).toBe(0);
      expect((await cli(['tokens', 'revoke', id])).stdout).toBe(`revoked token ${id}\n`);
      expect((await cli(['users'], undefined, { RUNPLANE_TOKEN: ciToken })).code).toBe(4);
    },
    SLOW,
  );

  it(
    'refuses an invalid run file with every error at its line and column, and sends nothing',
    async () => {
      // The schema the CLI checks files against is the one the server publishes (public, like /healthz).
      const served = await fetch(`${server.url}/api/v1/schemas/run-file`);
      expect(served.status).toBe(200);
      expect(await served.json()).toEqual(RUN_FILE_SCHEMA);
      const bad = file(
        'bad.yml',
        [
          'name: Tour',
          'resources: {cpu: 1, memory: 4 gigs}',
          'groups:',
          '  - name: g',
          '    colour: red',
          '    jobs:',
          '      - name: a',
          '        commands: [x]',
          '        depends_on: [nope]',
          'jobs:',
          '  - name: a',
          '    replicas: 0',
          '',
        ].join('\n'),
      );
      const r = await cli(['apply', '-f', bad]);
      expect(r.code).toBe(3);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        [
          `${bad}:1:7: name: must be lowercase letters, digits and -, starting with a letter or digit (at most 63)`,
          `${bad}:2:29: resources.memory: must be a size with a unit, like 512MB or 4GB`,
          `${bad}:5:5: groups[0].colour: unknown key "colour" (known: name, attributes, cancel_after_n_failures, ` +
            'groups, jobs)',
          `${bad}:9:22: groups[0].jobs[0].depends_on[0]: no job named "nope" in the file`,
          `${bad}:11:5: jobs[0]: missing "commands"`,
          `${bad}:11:11: jobs[0].name: job name "a" is used twice (also at groups[0].jobs[0])`,
          `${bad}:12:15: jobs[0].replicas: must be >= 1`,
          `runplane apply: 7 errors in ${bad}; nothing was sent`,
          '',
        ].join('\n'),
      );
      expect(JSON.parse((await cli(['ps', '-a', '--json'])).stdout)).toEqual([]);
    },
    SLOW,
  );

  it(
    'applies a run: plan, submission, progress to done (exit 0); a retried apply makes no second run',
    async () => {
      const path = file('run.yml', RUN_FILE);
      const r = await cli(['apply', '-f', path]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const [plan, rest] = r.stdout.split('\nsubmitted run tour-1 ');
      expect(squash(plan)).toBe(
        [
          'Plan: run tour-1 in project demo',
          '',
          'JOB GROUP REPLICAS CPU MEMORY GPU DEPENDS ON PRICE/HOUR',
          'download prep 1 0.1 128MB - $C',
          'train sweep/small 2 0.1 128MB - $C',
          'report - 1 0.1 128MB - $C',
          '',
          '3 groups, 3 job entries, 4 jobs; $C per hour while all run (rates: cpu $C/core-hour, disk $C/GiB-hour, ' +
            'gpu $C/gpu-hour, memory $C/GiB-hour)',
          '',
        ].join('\n'),
      );
      // Piped: one plain line per change, ending with the outcome.
      const lines = rest.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^\([0-9a-f-]{36}\); following it \(Ctrl-C stops following\)$/);
      expect(lines.slice(1, -1).every((l) => /^\d\d:\d\d:\d\d {2}tour-1 {2}\w+/.test(l))).toBe(true);
      expect(lines.at(-2)).toMatch(/ {2}done {2}4 done {2}/);
      expect(lines.at(-1)).toMatch(/^run tour-1 done after \d+s; cost (<?\$[\d.]+)$/);

      const id = (JSON.parse((await cli(['ps', 'tour-1', '--json'])).stdout) as { id: string }).id;
      const retried = await cli(['apply', '-f', path, '--detach', '--json']);
      expect(retried.code).toBe(0);
      expect((JSON.parse(retried.stdout) as { id: string }).id).toBe(id);
      const runs = JSON.parse((await cli(['ps', '-a', '--json'])).stdout) as { run_name: string }[];
      expect(runs.map((x) => x.run_name)).toEqual(['tour-1']);

      const dry = await cli(['apply', '-f', path, '--dry-run', '--json']);
      expect(JSON.parse(dry.stdout)).toMatchObject({ run_name: 'tour-1', job_groups: [{ ref: 'prep' }, {}, {}] });
    },
    SLOW,
  );

  it(
    'a failing run: apply exits 1 and names the failed job',
    async () => {
      const path = file(
        'fail.yml',
        'name: broken\nresources: {cpu: 0.1, memory: 64MB}\njobs:\n  - {name: ok, commands: ["true"]}\n' +
          '  - {name: boom, commands: ["echo bad >&2", "exit 3"]}\n',
      );
      const r = await cli(['apply', '-f', path]);
      expect(r.code).toBe(1);
      expect(r.stdout).toMatch(/\nrun broken failed after \d+s; cost \S+\n/);
      expect(squash(r.stdout)).toContain(
        'JOB REPLICA STATUS REASON EXIT\nboom 0 failed container_exited_with_error 3\n' +
          "(runplane logs broken --job NAME shows a job's output)\n",
      );
      const logs = await cli(['logs', 'broken', '--job', 'boom']);
      expect(logs).toMatchObject({ code: 0, stdout: '', stderr: 'bad\n' });
    },
    SLOW,
  );

  it(
    'ps, groups, logs, cost and billing on the finished run, as tables and as --json',
    async () => {
      expect(squash((await cli(['ps'])).stdout)).toBe('no runs\n');
      expect(squash((await cli(['ps', '-a'])).stdout)).toBe(
        'RUN STATUS JOBS AGE COST\nbroken failed 1 done, 1 failed T $C\ntour-1 done 4 done T $C\n',
      );
      expect(squash((await cli(['ps', 'tour-1'])).stdout)).toBe(
        [
          'RUN STATUS JOBS AGE COST',
          'tour-1 done 4 done T $C',
          '',
          'JOB REPLICA STATUS REASON ATTEMPTS EXIT COST',
          'download 0 done done_by_runner 1 0 $C',
          'train 0 done done_by_runner 1 0 $C',
          'train 1 done done_by_runner 1 0 $C',
          'report 0 done done_by_runner 1 0 $C',
          '',
        ].join('\n'),
      );
      expect(squash((await cli(['groups', 'tour-1'])).stdout)).toBe(
        [
          'GROUP ID STATUS JOBS PENDING DONE FAILED CANCELLED COST CANCELLATION',
          'tour-1 0 success 4 0 4 0 0 $C',
          '├─ prep 1 success 1 0 1 0 0 $C',
          '└─ sweep 2 success 2 0 2 0 0 $C',
          ' └─ small 3 success 2 0 2 0 0 $C',
          '',
        ].join('\n'),
      );
      const tree = JSON.parse((await cli(['groups', 'tour-1', '--json'])).stdout);
      expect(tree).toMatchObject({
        job_group_id: 0,
        counts: { n_jobs: 4 },
        children: [
          { attributes: { name: 'prep' } },
          { attributes: { name: 'sweep' }, children: [{ attributes: { name: 'small' } }] },
        ],
      });

      const logs = await cli(['logs', 'tour-1']);
      expect(logs.stdout).toBe('download/0| downloading\ntrain/0| train 0\ntrain/1| train 1\nreport/0| report\n');
      expect(logs.stderr).toBe('train/0| hello\ntrain/1| hello\n');
      expect(await cli(['logs', 'tour-1', '--job', 'train', '--replica', '1'])).toMatchObject({
        stdout: 'train 1\n',
        stderr: 'hello\n',
      });
      const chunks = (await cli(['logs', 'tour-1', '--job', 'report', '--json'])).stdout.trim().split('\n');
      expect(chunks.map((c) => JSON.parse(c))).toEqual([
        expect.objectContaining({ job_name: 'report', replica_num: 0, stream: 'stdout', data: 'report\n', offset: 0 }),
      ]);
      expect((await cli(['logs', 'tour-1', '--job', 'nope'])).code).toBe(4);

      expect(squash((await cli(['cost', 'tour-1'])).stdout)).toMatch(
        /^RESOURCE USAGE UNIT COST\ncpu [\d.]+ core-hour \$C\nmemory [\d.]+ GiB-hour \$C\ntotal \$C for run tour-1 \(done\)\n$/,
      );
      const cost = JSON.parse((await cli(['cost', 'tour-1', '--json'])).stdout) as { total_usd: number };
      expect(cost.total_usd).toBeGreaterThan(0);

      const today = new Date().toISOString().slice(0, 10);
      expect(squash((await cli(['billing'])).stdout)).toMatch(
        new RegExp(`^DAY COST\n${today} \\$C\ntotal \\$C for project demo, `),
      );
      const rows = JSON.parse((await cli(['billing', '--by', 'user,resource', '--json'])).stdout) as { user: string }[];
      expect(rows.map((x) => x.user)).toEqual(['admin', 'admin']);
      expect((await cli(['billing', '--by', 'week'])).code).toBe(2);
    },
    SLOW,
  );

  it(
    'on a terminal: apply rewrites one progress line; billing draws per-day bars',
    async () => {
      const path = file(
        'tty.yml',
        'name: on-tty\nresources: {cpu: 0.1, memory: 64MB}\njobs:\n  - {name: hi, commands: [echo hi]}\n',
      );
      const applied = await runplaneOnTerminal(env, ['apply', '-f', path, '--yes']);
      outputs.push(applied.stdout, applied.stderr);
      expect(applied.code).toBe(0);
      // The progress line is rewritten in place (carriage return, erase line), not one line per change.
      expect(applied.stdout).toContain('\r\x1b[Kon-tty  ');
      expect(applied.stdout).toMatch(/\r\nrun on-tty done after \d+s; cost \S+\r\n$/);
      const bars = await runplaneOnTerminal(env, ['billing']);
      const today = new Date().toISOString().slice(0, 10);
      expect(bars.stdout).toMatch(new RegExp(`${today} +<?\\$[\\d.]+ +█+\\r\\n`));
      expect(bars.stdout.split('\r\n')).toHaveLength(32); // 30 days, the total, the end
    },
    SLOW,
  );

  it(
    'Ctrl-C leaves a followed run running; cancel and stop it; ps -w and logs -f end when it ends',
    async () => {
      const path = file(
        'long.yml',
        'name: long-1\nresources: {cpu: 0.1, memory: 64MB}\ngroups:\n' +
          '  - {name: first, jobs: [{name: sleeper, commands: ["echo started", "sleep 600"]}]}\n' +
          '  - {name: second, jobs: [{name: other, commands: ["sleep 600"]}]}\n',
      );
      const apply = start(['apply', '-f', path]);
      await waitFor('both jobs running', async () => / {2}running {2}2 running/.test(apply.stdout()), 90_000);
      apply.child.kill('SIGINT');
      expect(await apply.exited).toBe(130);
      expect(apply.stderr()).toBe(
        'stopped following; run long-1 keeps running (runplane ps long-1, runplane stop long-1)\n',
      );
      expect(JSON.parse((await cli(['ps', 'long-1', '--json'])).stdout)).toMatchObject({ status: 'running' });

      const watch = start(['ps', 'long-1', '-w']);
      const follow = start(['logs', 'long-1', '--job', 'sleeper', '-f']);
      await waitFor('the followed log', async () => follow.stdout() === 'started\n', 90_000);
      await waitFor('the watch', async () => / running {2}2 running/.test(watch.stdout()), 90_000);

      const cancelled = await cli(['cancel', 'long-1', 'second', '--reason', 'not needed']);
      expect(cancelled.stdout).toMatch(/^cancelled group 2 \(second\) of run long-1: not needed by admin at \S+\n$/);
      await waitFor(
        'the cancelled group',
        async () =>
          squash((await cli(['groups', 'long-1'])).stdout).includes(
            '└─ second 2 cancelled 1 0 0 0 1 $C not needed by admin',
          ),
        90_000,
      );
      expect(watch.child.exitCode).toBeNull();
      expect(follow.child.exitCode).toBeNull();

      const stopped = await cli(['stop', 'long-1']);
      expect(stopped.stdout).toMatch(/^stopping run long-1: (terminating|terminated)\n$/);
      expect(await follow.exited).toBe(0);
      expect(await watch.exited).toBe(0);
      expect(follow.stdout()).toBe('started\n');
      expect(watch.stdout().trimEnd().split('\n').at(-1)).toMatch(/ {2}long-1 {2}terminated {2}/);
      expect((await cli(['stop', 'nope'])).code).toBe(4);
    },
    SLOW,
  );

  it(
    'RUNPLANE_PROJECT picks the project (--project beats it); cancel and stop as --json; apply exits 1 when stopped',
    async () => {
      expect((await cli(['projects', 'create', 'other-1'])).stdout).toBe('created project other-1\n');
      const inOther = { RUNPLANE_PROJECT: 'other-1' };
      const path = file(
        'stop-me.yml',
        'name: stop-me\nresources: {cpu: 0.1, memory: 64MB}\ngroups:\n' +
          '  - {name: keep, jobs: [{name: sleeper, commands: ["sleep 600"]}]}\n' +
          '  - {name: drop, jobs: [{name: other, commands: ["sleep 600"]}]}\n',
      );
      const apply = spawnRunplane({ ...env, ...inOther }, ['apply', '-f', path]);
      spawned.push(apply);
      await waitFor('both jobs running', async () => / {2}running {2}2 running/.test(apply.stdout()), 90_000);
      const names = (r: CliResult) => (JSON.parse(r.stdout) as { run_name: string }[]).map((x) => x.run_name);
      expect(names(await cli(['ps', '-a', '--json'], undefined, inOther))).toEqual(['stop-me']);
      const demo = await cli(['ps', '-a', '--json', '--project', 'demo'], undefined, inOther);
      expect(names(demo)).not.toContain('stop-me');
      expect(names(demo)).toContain('tour-1');

      const cancelled = await cli(['cancel', 'stop-me', 'drop', '--reason', 'enough', '--json'], undefined, inOther);
      expect(cancelled.code).toBe(0);
      expect(JSON.parse(cancelled.stdout)).toMatchObject({ job_group_id: 2, reason: 'enough', cancelled_by: 'admin' });
      const stopped = await cli(['stop', 'stop-me', '--json'], undefined, inOther);
      expect(stopped.code).toBe(0);
      const run = JSON.parse(stopped.stdout) as { run_name: string; status: string };
      expect(run.run_name).toBe('stop-me');
      expect(['terminating', 'terminated']).toContain(run.status);
      // The followed run ended other than done: apply says so and exits 1.
      expect(await apply.exited).toBe(1);
      expect(apply.stdout()).toMatch(/\nrun stop-me terminated after \S+; cost \S+\n/);
      expect(squash(apply.stdout())).toContain(
        'sleeper 0 terminated stopped_by_user 143\nother 0 terminated job_group_cancelled 143\n',
      );
    },
    SLOW,
  );

  it(
    'applies a run file with depends_on: parents first, a failed parent ends its dependents, always_run runs',
    async () => {
      const path = file(
        'dag.yml',
        [
          'name: dag-1',
          'resources: {cpu: 0.1, memory: 64MB}',
          'jobs:',
          '  - {name: first, commands: ["echo first"]}',
          '  - {name: second, depends_on: [first], commands: ["echo second"], replicas: 2}',
          '  - {name: broken, depends_on: [second], commands: ["exit 3"]}',
          '  - {name: never, depends_on: [broken], commands: ["echo never"]}',
          '  - {name: report, depends_on: [never, second], always_run: true, commands: ["echo report"]}',
          '',
        ].join('\n'),
      );
      const r = await cli(['apply', '-f', path]);
      expect(r.code).toBe(1);
      expect(squash(r.stdout)).toContain('second - 2 0.1 64MB - first $C');
      const run = JSON.parse((await cli(['ps', 'dag-1', '--json'])).stdout) as {
        jobs: { job_name: string; status: string; termination_reason: string | null; depends_on: string[] }[];
      };
      const status = Object.fromEntries(run.jobs.map((j) => [j.job_name, `${j.status}/${j.termination_reason}`]));
      expect(status).toEqual({
        first: 'done/done_by_runner',
        second: 'done/done_by_runner',
        broken: 'failed/container_exited_with_error',
        never: 'terminated/dependency_failed',
        report: 'done/done_by_runner',
      });
      expect(run.jobs.find((j) => j.job_name === 'report')?.depends_on).toHaveLength(3);
    },
    SLOW,
  );
});
