import { ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { groupAlive } from '../../src/worker/proc';
import type { Worker } from '../../src/worker/worker';
import { makeProject, makeRun } from '../support/factories';
import { listen, startWorker, tempWorkDir, waitFor } from '../support/runplane-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { invariants } from '../support/workers';

const CLI = join(__dirname, '../../dist/src/cli.js');

interface Submission {
  id: string;
  submission_num: number;
  status: string;
  termination_reason: string | null;
  provisioning_data: Record<string, unknown> | null;
  runtime_data: Record<string, unknown> | null;
}

/** `runplane worker` as a real process (the built CLI: `npm test` builds first), its output kept. */
class WorkerProcess {
  readonly child: ChildProcess;
  output = '';
  readonly exited: Promise<number | null>;
  constructor(url: string, token: string, workerId: string, workDir: string) {
    this.child = spawn(
      process.execPath,
      [
        CLI,
        'worker',
        '--url',
        url,
        '--worker-id',
        workerId,
        '--work-dir',
        workDir,
        '--heartbeat-interval-s',
        '0.3',
        '--poll-interval-s',
        '0.3',
        '--stop-grace-s',
        '2',
        '--capacity',
        'cpu=2,memory_mib=2048',
      ],
      { env: { PATH: process.env.PATH, RUNPLANE_TOKEN: token, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child.stdout?.on('data', (d) => (this.output += d));
    this.child.stderr?.on('data', (d) => (this.output += d));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }
}

/**
 * A worker killed with kill -9 mid-job: its lease lapses (RUNPLANE_LEASE_SECONDS=5 here), the attempt ends
 * `instance_unreachable` and is retried on another worker; the job it left running is killed when it restarts, and it
 * reports nothing for what it no longer holds. Restarted before the lease lapses, it reports what it still holds.
 */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('a worker that crashes and restarts', () => {
  let t: TestApp;
  let url: string;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  let workDir: string;
  const processes: WorkerProcess[] = [];
  const workers: Worker[] = [];
  beforeAll(async () => {
    t = await createTestApp(
      { RUNPLANE_BACKGROUND_LOOPS: 'true', RUNPLANE_LEASE_SECONDS: '5' },
      { ownDatabase: 'recovery' },
    );
    url = await listen(t);
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
    workDir = tempWorkDir();
  });
  afterEach(async () => {
    for (const p of processes.splice(0)) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
  afterAll(async () => {
    await t.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const workerProcess = (workerId: string) => {
    const p = new WorkerProcess(url, service.token, workerId, workDir);
    processes.push(p);
    return p;
  };
  const submissions = async (runId: string): Promise<Submission[]> =>
    (await t.http.get(`/api/v1/projects/${project}/runs/${runId}`).set(owner.auth).expect(200)).body.jobs[0]
      .job_submissions;
  /** Sleeps only on its first attempt: a retry finishes at once. */
  const submitSleeper = () =>
    makeRun(t, owner, project, {
      priority: 1000,
      retry: { on_events: ['interruption'], max_attempts: 2 },
      jobs: [
        {
          spec: {
            commands: ['if [ "$RUNPLANE_SUBMISSION_NUM" = 0 ]; then sleep 600; fi'],
            resources: { cpu: 1, memory_mib: 256 },
          },
        },
      ],
    });
  const runningPgid = async (runId: string) =>
    waitFor('the first attempt to run', async () => {
      const [s] = await submissions(runId);
      return s.status === 'running' && Number(s.provisioning_data?.pid);
    });

  // kill -9 → the lease lapses → instance_unreachable → the retry runs elsewhere; the restart kills the orphan.
  it('kill -9 mid-job: lease lapse, retry on a second worker, the orphan killed when it restarts', async () => {
    const first = workerProcess('w-crash');
    const run = await submitSleeper();
    const pgid = await runningPgid(run.id);
    first.child.kill('SIGKILL');
    await first.exited;
    processes.splice(processes.indexOf(first), 1);
    // The job outlives its worker (its own session)...
    expect(groupAlive(pgid)).toBe(true);

    // ...the lease lapses, the server ends the attempt and queues the retry.
    const lapsed = await waitFor(
      'the lapsed lease',
      async () => {
        const subs = await submissions(run.id);
        return subs.length === 2 && subs;
      },
      20_000,
    );
    expect(lapsed[0]).toMatchObject({ status: 'failed', termination_reason: 'instance_unreachable' });

    // A second worker runs the retry.
    workers.push(await startWorker({ url, token: service.token, workerId: 'w-second', workDir }));
    const retried = await waitFor('the retry to be done', async () => {
      const subs = await submissions(run.id);
      return subs[1]?.status === 'done' && subs;
    });
    expect(retried[1].provisioning_data?.worker_id).toBe('w-second');
    expect(groupAlive(pgid)).toBe(true);

    // The crashed worker comes back: it kills what its previous process left, and reports nothing for it.
    const again = workerProcess('w-crash');
    await waitFor('the orphan to be killed', async () => !groupAlive(pgid), 15_000);
    await waitFor('the restarted worker to be up', async () => again.output.includes('running jobs for'));
    await new Promise((r) => setTimeout(r, 1000));
    expect(again.output).toContain('killed a job left by a previous process');
    expect(again.output).not.toContain('final report not accepted');
    const after = await submissions(run.id);
    expect(after[0]).toMatchObject({
      status: 'failed',
      termination_reason: 'instance_unreachable',
      runtime_data: null,
    });
    expect(after).toHaveLength(2);
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  });

  it('restarted before its lease lapses, it kills the orphan and reports it, so the retry runs at once', async () => {
    const first = workerProcess('w-quick');
    const run = await submitSleeper();
    const pgid = await runningPgid(run.id);
    first.child.kill('SIGKILL');
    await first.exited;
    processes.splice(processes.indexOf(first), 1);
    const t0 = Date.now();
    workerProcess('w-quick');
    await waitFor('the orphan to be killed', async () => !groupAlive(pgid), 10_000);
    const subs = await waitFor('the retry to be done', async () => {
      const s = await submissions(run.id);
      return s[1]?.status === 'done' && s;
    });
    // Sooner than the lease (5 s) and the lapsed-lease loop (every 2 s) would have ended it.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(subs[0]).toMatchObject({
      status: 'failed',
      termination_reason: 'instance_unreachable',
      runtime_data: { orphaned: true },
    });
  });

  it('a worker id already running in a work dir is refused; a refused token stops the worker', async () => {
    const first = workerProcess('w-once');
    await waitFor('the first worker to be up', async () => first.output.includes('running jobs for'));
    const second = workerProcess('w-once');
    expect(await second.exited).toBe(1);
    expect(second.output).toMatch(/worker w-once already runs: .*in use by process \d+/);
    const bad = new WorkerProcess(url, 'rp_not_a_token', 'w-bad-token', workDir);
    expect(await bad.exited).toBe(1);
    expect(bad.output).toContain('the server refused the token (401)');
  });
});
