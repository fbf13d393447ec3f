import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Execution, type ExecutionSpec } from '../../src/worker/executor';
import { MemoryEnforcer, offJob } from '../../src/worker/memory';
import { groupAlive, running as alive } from '../../src/worker/proc';
import { CapturingSink } from '../support/runplane-worker';

/** The executor on real processes: bash, process groups, signals, /proc. Linux only (as the worker's limits are). */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('the executor runs jobs as real processes', () => {
  let dir: string;
  let n = 0;
  const memory = MemoryEnforcer.create('rss', 100);
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-executor-'));
  });
  afterAll(() => {
    memory.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const start = (commands: string[], over: Partial<ExecutionSpec> = {}) => {
    const name = `job${++n}`;
    const sink = new CapturingSink();
    const spec: ExecutionSpec = {
      name,
      commands,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ONLY: 'this' },
      jobDir: join(dir, 'jobs', name),
      scriptDir: join(dir, 'scripts'),
      memory: offJob,
      sink,
      stopGraceS: 10,
      ...over,
    };
    return { exec: Execution.start(spec), sink: (over.sink as CapturingSink | undefined) ?? sink, spec };
  };

  it('runs the commands in their own directory and group, with only the given environment; output as is', async () => {
    const { exec, sink, spec } = start([
      'echo "dir=$PWD"',
      'echo "only=$ONLY home=${HOME-unset}"',
      'echo to-stderr >&2',
      'echo "pgid=$(ps -o pgid= $$ | tr -d " ") sid=$(ps -o sid= $$ | tr -d " ")"',
      'printf "\\x00\\xff end"',
    ]);
    const e = await exec;
    const result = await e.done;
    expect(result).toMatchObject({ exitStatus: 0, stoppedBy: null, memoryMode: 'off' });
    const out = sink.text('stdout');
    expect(out).toContain(`dir=${spec.jobDir}\n`);
    expect(out).toContain('only=this home=unset\n');
    expect(out).toContain(`pgid=${e.pid} sid=${e.pid}\n`);
    expect(Buffer.concat(sink.chunks.filter((c) => c.stream === 'stdout').map((c) => c.data)).subarray(-6)).toEqual(
      Buffer.from([0x00, 0xff, 0x20, 0x65, 0x6e, 0x64]),
    );
    expect(sink.text('stderr')).toBe('to-stderr\n');
    expect(sink.closed).toBe(true);
    expect(result.wallS).toBeGreaterThan(0);
    expect(result.cpuS).not.toBeNull();
  });

  it("reports the failing command's exit status and runs nothing after it", async () => {
    const { exec, sink } = start(['echo before', 'exit 3', 'echo after']);
    expect(await (await exec).done).toMatchObject({ exitStatus: 3, stoppedBy: null });
    expect(sink.text('stdout')).toBe('before\n');
  });

  it('measures CPU time of what the job waited for', async () => {
    const { exec } = start(['i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done']);
    const result = await (await exec).done;
    expect(result.cpuS).toBeGreaterThan(0.1);
    expect(result.cpuS).toBeLessThanOrEqual(result.wallS * 2 + 0.1);
  });

  it('stops a job with SIGTERM to its whole group: a job that handles it exits its own way', async () => {
    const { exec, sink } = start(["trap 'echo got TERM; exit 7' TERM", 'echo ready', 'sleep 600 & wait']);
    const e = await exec;
    while (!sink.text('stdout').includes('ready')) await new Promise((r) => setTimeout(r, 20));
    const t0 = Date.now();
    e.stop({ kind: 'cancel', status: 'terminated', reason: 'job_group_cancelled' });
    const result = await e.done;
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(result).toMatchObject({
      exitStatus: 7,
      stoppedBy: { kind: 'cancel', status: 'terminated', reason: 'job_group_cancelled' },
    });
    expect(sink.text('stdout')).toContain('got TERM');
    expect(groupAlive(e.pid)).toBe(false);
  });

  it('sends SIGKILL to the group after the grace period to a job that ignores SIGTERM', async () => {
    const { exec, sink } = start(["trap '' TERM", 'sleep 600 & echo "child=$!"', 'wait'], { stopGraceS: 0.5 });
    const e = await exec;
    while (!/child=\d+/.test(sink.text('stdout'))) await new Promise((r) => setTimeout(r, 20));
    const child = Number(/child=(\d+)/.exec(sink.text('stdout'))?.[1]);
    const t0 = Date.now();
    e.stop({ kind: 'shutdown' });
    e.stop({ kind: 'lost' }); // the first cause is kept
    const result = await e.done;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(450);
    expect(result).toMatchObject({ exitStatus: 137, stoppedBy: { kind: 'shutdown' } });
    expect(alive(child)).toBe(false);
    expect(groupAlive(e.pid)).toBe(false);
  });

  it('ends a job past its max_duration_s', async () => {
    const t0 = Date.now();
    const { exec } = start(['sleep 600'], { maxDurationS: 1 });
    const result = await (await exec).done;
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(Date.now() - t0).toBeLessThan(8000);
    expect(result).toMatchObject({ exitStatus: 143, stoppedBy: { kind: 'max_duration' } });
  });

  it('kills what a finished job left in its group (a daemon)', async () => {
    const { exec, sink } = start(['sleep 300 & echo "daemon=$!"', 'echo done']);
    const e = await exec;
    const result = await e.done;
    expect(result).toMatchObject({ exitStatus: 0, stoppedBy: null });
    const daemon = Number(/daemon=(\d+)/.exec(sink.text('stdout'))?.[1]);
    expect(alive(daemon)).toBe(false);
    expect(groupAlive(e.pid)).toBe(false);
  });

  it('kills a job whose process group goes past its memory (watched in /proc), and says how much it used', async () => {
    const limitMib = 64;
    const { exec } = start(['head -c 400000000 /dev/zero | tail -c 400000000 | sleep 60'], {
      memory: memory.forJob('mem', limitMib),
    });
    const result = await (await exec).done;
    expect(result).toMatchObject({ exitStatus: 137, stoppedBy: { kind: 'memory' }, memoryMode: 'rss' });
    expect(result.peakMemoryMib).toBeGreaterThan(limitMib);
    expect(result.wallS).toBeLessThan(30);
  });

  it('measures a well-behaved job without stopping it', async () => {
    const { exec } = start(['sleep 0.3'], { memory: memory.forJob('ok', 256) });
    const result = await (await exec).done;
    expect(result).toMatchObject({ exitStatus: 0, stoppedBy: null, memoryMode: 'rss' });
    expect(result.peakMemoryMib).toBeGreaterThan(0);
    expect(result.peakMemoryMib).toBeLessThan(256);
  });

  it('stops a job whose output the server refuses past its quota', async () => {
    const sink = new CapturingSink(100_000);
    const { exec } = start(['while true; do echo 0123456789abcdef; done'], { sink });
    const result = await (await exec).done;
    expect(result.stoppedBy).toEqual({ kind: 'log_quota' });
  });

  it('waits for a sink that is behind: the job blocks on its output (nothing dropped), then goes on', async () => {
    // A sink with room for 1 MiB until released: past that the executor stops reading the pipe.
    class SlowSink extends CapturingSink {
      gate: { promise: Promise<void>; open: () => void };
      constructor() {
        super();
        let open!: () => void;
        this.gate = { promise: new Promise<void>((r) => (open = r)), open };
      }
      bytes = () => this.chunks.reduce((n, c) => n + c.data.length, 0);
      whenWritable(): Promise<void> | undefined {
        return this.bytes() >= 1024 * 1024 ? this.gate.promise : undefined;
      }
    }
    const sink = new SlowSink();
    const total = 8 * 1024 * 1024;
    const { exec } = start([`head -c ${total} /dev/zero | tr '\\0' x`, 'echo " written"'], { sink });
    const e = await exec;
    let ended = false;
    void e.done.then(() => (ended = true));
    await new Promise((r) => setTimeout(r, 1000));
    // Blocked: the sink holds about its 1 MiB (plus what one read took), the job has not finished writing.
    expect(ended).toBe(false);
    expect(sink.bytes()).toBeLessThan(2 * 1024 * 1024);
    sink.gate.open();
    const result = await e.done;
    expect(result).toMatchObject({ exitStatus: 0, stoppedBy: null });
    expect(sink.text('stdout')).toBe(`${'x'.repeat(total)} written\n`);
  });

  it('fails to start where it cannot (its working directory cannot be made)', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    await expect(start(['true'], { jobDir: join(file, 'job') }).exec).rejects.toThrow(/ENOTDIR|EEXIST/);
  });
});
