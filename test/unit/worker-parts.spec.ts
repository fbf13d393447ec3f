import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { required } from '../../src/common/required';
import { CgroupV2 } from '../../src/worker/cgroup';
import type { ExecutionResult } from '../../src/worker/executor';
import { containerCommand, jobEnvironment, jobScript, parseTimes, WRAPPER } from '../../src/worker/job-script';
import { outcomeOf } from '../../src/worker/outcome';
import { defaultWorkerId, parseCapacity, parseWorkerArgs, WorkerUsageError } from '../../src/worker/options';
import { parseStat } from '../../src/worker/proc';

/** The worker's pieces that need no server: the job script (run by a real bash), parsers, the outcome table. */
describe('worker parts', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-worker-parts-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs a job script under the wrapper in `dir`, as the executor does: its exit status and stdout. */
  const run = (commands: string[]) => {
    const script = join(dir, 'job.sh');
    writeFileSync(script, jobScript(commands));
    const times = join(dir, 'job.times');
    const r = spawnSync('bash', ['--noprofile', '--norc', '-c', WRAPPER, 'runplane-job', times, '', script], {
      cwd: dir,
      encoding: 'utf8',
    });
    return { status: r.status, stdout: r.stdout };
  };

  describe('the job script', () => {
    it('runs every command in order in one shell: cd and variables carry over', () => {
      expect(run(['cd /', 'X=42', 'echo "$PWD $X"'])).toEqual({ status: 0, stdout: '/ 42\n' });
    });

    it('stops at the first command that fails, with its exit status', () => {
      expect(run(['echo one', 'exit 3', 'echo never'])).toEqual({ status: 3, stdout: 'one\n' });
      expect(run(['echo one', 'false', 'echo never'])).toEqual({ status: 1, stdout: 'one\n' });
      expect(run(['echo a | grep -q b', 'echo never'])).toEqual({ status: 1, stdout: '' });
    });

    it("judges each command by its own exit status, as a shell would (a failure inside one isn't its status)", () => {
      expect(run(['false; echo inside', 'echo next'])).toEqual({ status: 0, stdout: 'inside\nnext\n' });
      // ...unless the command asks for set -e itself.
      expect(run(['set -e; false; echo inside', 'echo never'])).toEqual({ status: 1, stdout: '' });
    });

    it('keeps multi-line commands, commands ending in a comment, and odd quoting intact', () => {
      expect(
        run(['for i in 1 2; do\n  echo $i\ndone', 'echo "it\'s" # a comment', 'printf \'%s\\n\' "$((1+1))"']),
      ).toEqual({
        status: 0,
        stdout: "1\n2\nit's\n2\n",
      });
    });

    it("shows the commands no positional parameters, none of the wrapper's variables; records CPU times", () => {
      rmSync(join(dir, 'job.times'), { force: true });
      expect(run(['echo "args=$# script=${__runplane_script-unset} times=${__runplane_times-unset}"'])).toEqual({
        status: 0,
        stdout: 'args=0 script=unset times=unset\n',
      });
      expect(parseTimes(readFileSync(join(dir, 'job.times'), 'utf8'))).not.toBeNull();
    });

    it("does not read the job's stdin for commands (a command that reads stdin gets nothing of the script)", () => {
      expect(run(['cat', 'echo after'])).toEqual({ status: 0, stdout: 'after\n' });
    });
  });

  it('reads the CPU times bash prints with `times`', () => {
    expect(parseTimes('0m0.010s 0m0.020s\n1m2.500s 0m0.470s\n')).toBeCloseTo(63.0, 6);
    expect(parseTimes('garbage')).toBeNull();
    const real = spawnSync('bash', ['-c', 'times'], { encoding: 'utf8' }).stdout;
    expect(parseTimes(real)).not.toBeNull();
  });

  it("gives a job a clean environment: PATH and HOME, its spec's env, then RUNPLANE_* (not the worker's token)", () => {
    const env = jobEnvironment(
      { PATH: '/bin', HOME: '/home/w', RUNPLANE_TOKEN: 'secret', DATABASE_URL: 'postgres://x', OTHER: 'x' },
      { FOO: 'bar', RUNPLANE_RUN_ID: 'spoofed', PATH: '/opt/bin' },
      { run_id: 'r', run_name: 'n', job_id: 'j', job_num: 1, replica_num: 2, submission_num: 3, job_group_id: 4 },
    );
    expect(env).toEqual({
      PATH: '/opt/bin',
      HOME: '/home/w',
      FOO: 'bar',
      RUNPLANE_RUN_ID: 'r',
      RUNPLANE_RUN_NAME: 'n',
      RUNPLANE_JOB_ID: 'j',
      RUNPLANE_JOB_NUM: '1',
      RUNPLANE_REPLICA_NUM: '2',
      RUNPLANE_SUBMISSION_NUM: '3',
      RUNPLANE_JOB_GROUP_ID: '4',
    });
  });

  it('runs an image job through the runtime with its limits, variables passed by name only', () => {
    const argv = containerCommand(
      { runtime: 'docker', image: 'alpine:3', name: 'runplane-s1', cpu: 1.5, memoryMib: 512, gpu: 0 },
      '/w/jobs/s1',
      '/w/scripts/s1.sh',
      ['FOO', 'RUNPLANE_RUN_ID'],
    );
    expect(argv.slice(0, 5)).toEqual(['docker', 'run', '--rm', '--name', 'runplane-s1']);
    const after = (flag: string) => argv[argv.indexOf(flag) + 1];
    expect(after('--memory')).toBe('512m');
    expect(after('--cpus')).toBe('1.5');
    expect(argv).not.toContain('--gpus');
    expect(argv.filter((a, i) => argv[i - 1] === '--env')).toEqual(['FOO', 'RUNPLANE_RUN_ID']);
    expect(argv).toContain('/w/jobs/s1:/workdir');
    expect(argv).toContain('/w/scripts/s1.sh:/runplane/job.sh:ro');
    expect(argv[argv.indexOf('alpine:3') - 1]).toBe('sh');
  });

  it('parses /proc/<pid>/stat, names with spaces and parentheses included', () => {
    const fields = Array.from({ length: 50 }, (_, i) => String(i + 3));
    fields[4 - 3] = '1'; // ppid
    fields[5 - 3] = '777'; // pgrp
    fields[6 - 3] = '778'; // session
    fields[14 - 3] = '10'; // utime
    fields[15 - 3] = '5'; // stime
    fields[22 - 3] = '123456'; // starttime
    fields[24 - 3] = '300'; // rss pages
    fields[0] = 'S';
    expect(parseStat(`4242 (a (weird) name) ${fields.join(' ')}`)).toEqual({
      pid: 4242,
      state: 'S',
      ppid: 1,
      pgrp: 777,
      session: 778,
      cpuTicks: 15,
      startTicks: 123456,
      rssPages: 300,
    });
    expect(parseStat('nonsense')).toBeNull();
    if (process.platform === 'linux')
      expect(parseStat(readFileSync('/proc/self/stat', 'utf8'))).toMatchObject({ pid: process.pid });
  });

  describe('what a finished job reports', () => {
    const result = (over: Partial<ExecutionResult>): ExecutionResult => ({
      exitStatus: 0,
      wallS: 1.23456,
      cpuS: 0.5,
      peakMemoryMib: 10.04,
      memoryMode: 'rss',
      stoppedBy: null,
      ...over,
    });
    it.each([
      [{}, true, 'done', 'done_by_runner', 0],
      [{ exitStatus: 3 }, true, 'failed', 'container_exited_with_error', 3],
      [{ exitStatus: 143, stoppedBy: { kind: 'max_duration' } }, true, 'terminated', 'max_duration_exceeded', 143],
      [{ exitStatus: 137, stoppedBy: { kind: 'memory' } }, true, 'failed', 'container_exited_with_error', 137],
      [{ exitStatus: 143, stoppedBy: { kind: 'log_quota' } }, true, 'failed', 'log_quota_exceeded', 143],
      [
        { exitStatus: 143, stoppedBy: { kind: 'cancel', status: 'terminated', reason: 'job_group_cancelled' } },
        true,
        'terminated',
        'job_group_cancelled',
        143,
      ],
      [
        { exitStatus: 143, stoppedBy: { kind: 'cancel', status: 'aborted', reason: 'aborted_by_user' } },
        false,
        'aborted',
        'aborted_by_user',
        143,
      ],
      [{ exitStatus: 143, stoppedBy: { kind: 'shutdown' } }, true, 'failed', 'interrupted_by_no_capacity', 143],
      [
        { exitStatus: 143, stoppedBy: { kind: 'shutdown' } },
        false,
        'failed',
        'failed_to_start_due_to_no_capacity',
        undefined,
      ],
    ] as const)('%j (started: %s) → %s/%s', (given, started, status, reason, exit) => {
      const over = given as Partial<ExecutionResult>;
      const report = required(outcomeOf(result(over), started, 256), 'the report');
      expect(report).toMatchObject({ status, termination_reason: reason });
      expect(report.exit_status).toBe(exit);
      expect(report.runtime_data).toMatchObject({
        exit_status: over.exitStatus ?? 0,
        wall_s: 1.235,
        cpu_s: 0.5,
        peak_memory_mib: 10,
        memory_limit_mib: 256,
        memory_enforcement: 'rss',
      });
      expect(report.runtime_data?.oom_killed).toBe(over.stoppedBy?.kind === 'memory' ? true : undefined);
    });

    it('reports nothing for a submission the worker lost', () => {
      expect(outcomeOf(result({ stoppedBy: { kind: 'lost' } }), true, 256)).toBeNull();
    });
  });

  describe('options', () => {
    it('takes the URL and token from the flags or the environment, the rest defaulted', () => {
      const o = parseWorkerArgs([], { RUNPLANE_URL: 'http://h:3000', RUNPLANE_TOKEN: 't' });
      expect(o).toMatchObject({
        url: 'http://h:3000',
        token: 't',
        workDir: './.runplane/worker',
        stopGraceS: 10,
        heartbeatIntervalS: 1,
        memoryEnforcement: 'auto',
      });
      expect(o.workerId).toBe(defaultWorkerId('./.runplane/worker'));
      expect(o.workerId).toMatch(/^[A-Za-z0-9_.:@-]{1,128}$/);
      expect(o.capacity.cpu).toBeGreaterThan(0);
      expect(o.containerRuntime).toBeUndefined();
      const f = parseWorkerArgs(
        ['--url', 'https://x', '--token', 'u', '--capacity', 'cpu=0.5,memory_mib=100', '--worker-id', 'w1'],
        { RUNPLANE_URL: 'http://ignored', RUNPLANE_TOKEN: 'ignored' },
      );
      expect(f).toMatchObject({ url: 'https://x', token: 'u', workerId: 'w1' });
      expect(f.capacity).toMatchObject({ cpu: 0.5, memory_mib: 100, gpu: 0 });
    });

    it.each([
      [[], 'url'],
      [['--url', 'http://x'], 'token'],
      [['--url', 'ftp://x', '--token', 't'], 'url'],
      [['--url', 'http://x', '--token', 't', '--capacity', 'cpu=two'], 'capacity'],
      [['--url', 'http://x', '--token', 't', '--capacity', 'memory_mib=1.5'], 'memory_mib'],
      [['--url', 'http://x', '--token', 't', '--worker-id', 'bad id'], 'worker-id'],
      [['--url', 'http://x', '--token', 't', '--container-runtime', 'Docker'], 'container-runtime'],
      [['--url', 'http://x', '--token', 't', '--memory-enforcement', 'always'], 'memory-enforcement'],
      [['--url', 'http://x', '--token', 't', '--stop-grace-s', '-1'], 'stop-grace-s'],
      [['--url', 'http://x', '--token', 't', '--bogus'], 'bogus'],
    ])('%j is refused naming %s', (argv, named) => {
      expect(() => parseWorkerArgs(argv, {})).toThrow(WorkerUsageError);
      expect(() => parseWorkerArgs(argv, {})).toThrow(named);
    });

    it('reads a capacity, keeping the base for keys left out', () => {
      expect(parseCapacity('gpu=2', { cpu: 8, memory_mib: 1000, gpu: 0 })).toEqual({
        cpu: 8,
        memory_mib: 1000,
        gpu: 2,
      });
    });
  });

  describe('cgroup v2 set-up (on a directory tree shaped like one)', () => {
    /** A fake cgroup2 mount: the worker's cgroup /svc with the given controllers and processes. */
    const fake = (controllers: string, procs: string, subtree = '') => {
      const root = mkdtempSync(join(dir, 'cg-'));
      writeFileSync(join(root, 'cgroup.controllers'), 'cpu memory io\n');
      const base = join(root, 'svc');
      mkdirSync(base);
      writeFileSync(join(base, 'cgroup.controllers'), controllers);
      writeFileSync(join(base, 'cgroup.procs'), procs);
      writeFileSync(join(base, 'cgroup.subtree_control'), subtree);
      return { root, base };
    };

    it('is not used without cgroup v2, without the memory controller, or with other processes in its cgroup', () => {
      const none = mkdtempSync(join(dir, 'cg-'));
      expect(CgroupV2.setUp(none, '0::/svc\n', 100)).toBeNull();
      const v1 = fake('cpu memory', '100\n');
      expect(CgroupV2.setUp(v1.root, '4:memory:/svc\n', 100)).toBeNull();
      const noMemory = fake('cpu io', '100\n');
      expect(CgroupV2.setUp(noMemory.root, '0::/svc\n', 100)).toBeNull();
      const crowded = fake('cpu memory', '100\n200\n');
      expect(CgroupV2.setUp(crowded.root, '0::/svc\n', 100)).toBeNull();
      expect(readFileSync(join(crowded.base, 'cgroup.subtree_control'), 'utf8')).toBe('');
    });

    it('moves the worker into a leaf, enables memory for its children, and limits each job', () => {
      const { root, base } = fake('cpu memory', '100\n');
      const cg = CgroupV2.setUp(root, '0::/svc\n', 100);
      expect(cg).not.toBeNull();
      expect(readFileSync(join(base, 'runplane-worker', 'cgroup.procs'), 'utf8')).toBe('100');
      expect(readFileSync(join(base, 'cgroup.subtree_control'), 'utf8')).toBe('+memory');
      const job = required(cg, 'the cgroup subtree').create('runplane-s1', 256 * 1024 * 1024);
      expect(job.procsFile).toBe(join(base, 'runplane-s1', 'cgroup.procs'));
      expect(readFileSync(join(base, 'runplane-s1', 'memory.max'), 'utf8')).toBe(String(256 * 1024 * 1024));
      expect(readFileSync(join(base, 'runplane-s1', 'memory.swap.max'), 'utf8')).toBe('0');
      expect(readFileSync(join(base, 'runplane-s1', 'memory.oom.group'), 'utf8')).toBe('1');
      writeFileSync(join(base, 'runplane-s1', 'memory.events'), 'low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n');
      writeFileSync(join(base, 'runplane-s1', 'memory.peak'), String(300 * 1024 * 1024));
      writeFileSync(join(base, 'runplane-s1', 'cpu.stat'), 'usage_usec 2500000\nuser_usec 2000000\n');
      expect(job.oomKilled()).toBe(true);
      expect(job.peakBytes()).toBe(300 * 1024 * 1024);
      expect(job.cpuSeconds()).toBe(2.5);
    });

    it('uses a subtree that already has memory enabled as it is', () => {
      const { root, base } = fake('cpu memory', '', 'memory');
      expect(CgroupV2.setUp(root, '0::/svc\n', 100)).not.toBeNull();
      expect(readFileSync(join(base, 'cgroup.subtree_control'), 'utf8')).toBe('memory');
    });
  });
});
