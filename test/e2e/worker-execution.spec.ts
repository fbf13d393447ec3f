import { rmSync } from 'node:fs';
import { required } from '../../src/common/required';
import { groupAlive, running } from '../../src/worker/proc';
import type { Worker } from '../../src/worker/worker';
import { makeProject, makeRun, RunBody } from '../support/factories';
import { capturingSinks, listen, startWorker, tempWorkDir, waitFor } from '../support/runplane-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { invariants } from '../support/workers';

interface Submission {
  id: string;
  submission_num: number;
  status: string;
  termination_reason: string | null;
  exit_status: number | null;
  provisioning_data: Record<string, unknown> | null;
  runtime_data: Record<string, unknown> | null;
}
/** The job's process group (its leader's pid), as the worker reported it. */
const pidOf = (s: Submission): number => {
  const pid = Number(s.provisioning_data?.pid);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`submission ${s.id} has no pid yet (${s.status})`);
  return pid;
};

interface Job {
  id: string;
  job_num: number;
  replica_num: number;
  job_group_id: number;
  status: string;
  submission_count: number;
  job_submissions: Submission[];
}

/**
 * The runplane worker against a real server over HTTP, running real processes: outcomes, retries, cancellation that
 * reaches the process, the time limit, daemons, the environment, container jobs refused, and a clean stop. The
 * server's background loops are off here: whatever is enforced, the worker enforced.
 */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('the runplane worker runs jobs as processes', () => {
  let t: TestApp;
  let url: string;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  let workDir: string;
  const capture = capturingSinks();
  const workers: Worker[] = [];
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'executor' });
    url = await listen(t);
    owner = await t.user();
    service = await t.user('service');
    admin = await t.user('admin');
    project = (await makeProject(t, owner)).name;
    workDir = tempWorkDir();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    expect((await invariants(t, admin)).mismatches).toEqual([]);
  });
  afterAll(async () => {
    await t.close();
    rmSync(workDir, { recursive: true, force: true });
  });

  const worker = async (
    workerId: string,
    over: Parameters<typeof startWorker>[0] extends infer O ? Partial<O> : never = {},
  ) => {
    const w = await startWorker({ url, token: service.token, workerId, workDir, sinks: capture.sinks, ...over });
    workers.push(w);
    return w;
  };
  const submit = (body: RunBody) => makeRun(t, owner, project, { priority: 1000, ...body });
  const runUrl = (runId: string) => `/api/v1/projects/${project}/runs/${runId}`;
  const view = async (runId: string) => (await t.http.get(runUrl(runId)).set(owner.auth).expect(200)).body;
  const jobsOf = async (runId: string): Promise<Job[]> => (await view(runId)).jobs;
  const until = (runId: string, status: string | ((run: { status: string; jobs: Job[] }) => boolean)) =>
    waitFor(`run ${runId} ${typeof status === 'string' ? status : 'in the expected state'}`, async () => {
      const run = await view(runId);
      return (typeof status === 'string' ? run.status === status : status(run)) && run;
    });
  const spec = (commands: string[], over: Record<string, unknown> = {}) => ({
    commands,
    resources: { cpu: 1, memory_mib: 256 },
    ...over,
  });

  it('runs a job to done with the contract environment, and reports where and how it ran', async () => {
    await worker('w-env');
    const run = await submit({
      run_name: 'env-check',
      job_groups: [{ ref: 'g' }],
      jobs: [
        {
          group_ref: 'g',
          replicas: 2,
          spec: spec(
            [
              'echo "RUN=$RUNPLANE_RUN_ID NAME=$RUNPLANE_RUN_NAME JOB=$RUNPLANE_JOB_ID"',
              'echo "NUM=$RUNPLANE_JOB_NUM REPLICA=$RUNPLANE_REPLICA_NUM"',
              'echo "SUB=$RUNPLANE_SUBMISSION_NUM GROUP=$RUNPLANE_JOB_GROUP_ID"',
              'echo "FOO=$FOO TOKEN=${RUNPLANE_TOKEN-none}"',
            ],
            { env: { FOO: 'bar baz' } },
          ),
        },
      ],
    });
    const done = await until(run.id, 'done');
    for (const job of done.jobs as Job[]) {
      const [s] = job.job_submissions;
      expect(s).toMatchObject({ status: 'done', termination_reason: 'done_by_runner', exit_status: 0 });
      expect(capture.output(s.id)).toBe(
        `RUN=${run.id} NAME=env-check JOB=${job.id}\n` +
          `NUM=${job.job_num} REPLICA=${job.replica_num}\n` +
          `SUB=0 GROUP=${job.job_group_id}\n` +
          'FOO=bar baz TOKEN=none\n',
      );
      expect(s.provisioning_data).toMatchObject({ worker_id: 'w-env', executor: 'process', memory_enforcement: 'rss' });
      expect(typeof s.provisioning_data?.hostname).toBe('string');
      expect(s.provisioning_data?.pid).toEqual(expect.any(Number));
      expect(s.runtime_data).toMatchObject({ exit_status: 0, memory_limit_mib: 256 });
      for (const k of ['wall_s', 'cpu_s']) expect(s.runtime_data?.[k]).toEqual(expect.any(Number));
    }
    expect(new Set((done.jobs as Job[]).map((j) => j.replica_num))).toEqual(new Set([0, 1]));
    expect(done.cost.total_usd).toBeGreaterThan(0);
  });

  it('exit 3 → failed with exit status 3, retried under the run policy on the same or another worker', async () => {
    await worker('w-fail-a', { capacity: { cpu: 1, memory_mib: 1024, gpu: 0 } });
    await worker('w-fail-b', { capacity: { cpu: 1, memory_mib: 1024, gpu: 0 } });
    const run = await submit({
      retry: { on_events: ['error'], max_attempts: 3 },
      jobs: [{ spec: spec(['echo "attempt $RUNPLANE_SUBMISSION_NUM"', 'exit 3', 'echo never']) }],
    });
    const failed = await until(run.id, 'failed');
    const [job] = failed.jobs as Job[];
    expect(job).toMatchObject({ status: 'failed', submission_count: 3 });
    expect(job.job_submissions.map((s) => [s.submission_num, s.status, s.termination_reason, s.exit_status])).toEqual([
      [0, 'failed', 'container_exited_with_error', 3],
      [1, 'failed', 'container_exited_with_error', 3],
      [2, 'failed', 'container_exited_with_error', 3],
    ]);
    for (const s of job.job_submissions) {
      expect(['w-fail-a', 'w-fail-b']).toContain(s.provisioning_data?.worker_id);
      expect(s.runtime_data).toMatchObject({ exit_status: 3 });
      expect(capture.output(s.id)).toBe(`attempt ${s.submission_num}\n`);
    }
  });

  it('a cancelled group reaches the process: SIGTERM to its group, reported job_group_cancelled', async () => {
    await worker('w-cancel');
    const run = await submit({
      job_groups: [{ ref: 'g' }],
      jobs: [{ spec: spec(['echo root']) }, { group_ref: 'g', spec: spec(['sleep 600 & echo "sleep=$!"; wait']) }],
    });
    const started = await until(run.id, (r) =>
      r.jobs.some((j) => j.job_group_id !== 0 && j.job_submissions[0].status === 'running'),
    );
    const job = required(
      (started.jobs as Job[]).find((j) => j.job_group_id !== 0),
      'the job in the group',
    );
    const s = job.job_submissions[0];
    const pgid = pidOf(s);
    const sleeper = await waitFor('the sleep pid', async () => /sleep=(\d+)/.exec(capture.output(s.id))?.[1]);
    expect(running(Number(sleeper))).toBe(true);

    const t0 = Date.now();
    await t.http
      .post(`${runUrl(run.id)}/job-groups/${job.job_group_id}/cancel`)
      .set(owner.auth)
      .send({})
      .expect(200);
    await waitFor('the process group to be gone', async () => !groupAlive(pgid), 10_000);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(running(Number(sleeper))).toBe(false);
    // The job shows terminated as soon as its group is cancelled; its submission once the worker reported.
    const after = await until(run.id, (r) =>
      r.jobs.every((j) => j.job_submissions[0].status === (j.id === job.id ? 'terminated' : 'done')),
    );
    const cancelled = required(
      (after.jobs as Job[]).find((j) => j.id === job.id),
      'the cancelled job',
    );
    expect(cancelled.job_submissions[0]).toMatchObject({
      status: 'terminated',
      termination_reason: 'job_group_cancelled',
      exit_status: 143,
    });
    expect(cancelled.job_submissions[0].runtime_data).toMatchObject({ stopped_by: 'cancel' });
  });

  it('stopping a run with abort ends its running job aborted/aborted_by_user', async () => {
    await worker('w-abort');
    const run = await submit({ jobs: [{ spec: spec(['sleep 600']) }] });
    const started = await until(run.id, 'running');
    const pgid = pidOf((started.jobs as Job[])[0].job_submissions[0]);
    await t.http
      .post(`${runUrl(run.id)}/stop`)
      .set(owner.auth)
      .send({ abort: true })
      .expect(200);
    const stopped = await until(run.id, (r) => r.jobs[0].job_submissions[0].status === 'aborted');
    expect(stopped.jobs[0].job_submissions[0].termination_reason).toBe('aborted_by_user');
    expect(groupAlive(pgid)).toBe(false);
  });

  it('max_duration_s: 1 → the worker stops it, terminated/max_duration_exceeded', async () => {
    await worker('w-maxdur');
    const run = await submit({
      retry: { on_events: ['error', 'interruption'], max_attempts: 3 },
      jobs: [{ spec: spec(['sleep 600'], { max_duration_s: 1 }) }],
    });
    const ended = await until(run.id, 'terminated');
    const [job] = ended.jobs as Job[];
    expect(job.submission_count).toBe(1);
    expect(job.job_submissions[0]).toMatchObject({ status: 'terminated', termination_reason: 'max_duration_exceeded' });
    expect(job.job_submissions[0].runtime_data).toMatchObject({ stopped_by: 'max_duration' });
    expect(groupAlive(pidOf(job.job_submissions[0]))).toBe(false);
  });

  it('a job that forks a daemon and exits is done, and the daemon is killed with its group', async () => {
    await worker('w-daemon');
    const run = await submit({ jobs: [{ spec: spec(['sleep 300 & echo "daemon=$!"', 'echo main done']) }] });
    const done = await until(run.id, 'done');
    const s = (done.jobs as Job[])[0].job_submissions[0];
    const daemon = Number(/daemon=(\d+)/.exec(capture.output(s.id))?.[1]);
    expect(running(daemon)).toBe(false);
    expect(groupAlive(pidOf(s))).toBe(false);
  });

  it('never claims a job that asks for an image without a container runtime', async () => {
    const run = await submit({
      jobs: [{ spec: spec(['echo in a container'], { image: 'alpine:3' }) }, { spec: spec(['echo plain']) }],
    });
    const w = await worker('w-no-runtime');
    await until(run.id, (r) => r.jobs.some((j) => j.status === 'done'));
    // Several more claims (every 0.2 s) pass, and it stays queued.
    await new Promise((r) => setTimeout(r, 1500));
    const jobs = await jobsOf(run.id);
    expect(jobs.find((j) => j.job_num === 0)).toMatchObject({ status: 'submitted' });
    expect(jobs.find((j) => j.job_num === 1)).toMatchObject({ status: 'done' });
    expect(w.held()).toEqual([]);
    // Out of the way of the other tests: the run is stopped.
    await t.http
      .post(`${runUrl(run.id)}/stop`)
      .set(owner.auth)
      .send({})
      .expect(200);
  });

  it('a worker that stops stops its jobs and reports them interrupted (retried under the policy)', async () => {
    const w = await worker('w-stopping');
    const run = await submit({
      retry: { on_events: ['no_capacity'], max_attempts: 2 },
      jobs: [{ spec: spec(['if [ "$RUNPLANE_SUBMISSION_NUM" = 0 ]; then sleep 600; fi']) }],
    });
    const started = await until(run.id, 'running');
    const pgid = pidOf((started.jobs as Job[])[0].job_submissions[0]);
    await w.stop();
    workers.splice(workers.indexOf(w), 1);
    expect(groupAlive(pgid)).toBe(false);
    const [job] = await jobsOf(run.id);
    expect(job.job_submissions[0]).toMatchObject({
      status: 'failed',
      termination_reason: 'interrupted_by_no_capacity',
    });
    expect(job.submission_count).toBe(2);
    await worker('w-after-stop');
    const done = await until(run.id, 'done');
    expect((done.jobs as Job[])[0].job_submissions[1].provisioning_data?.worker_id).toBe('w-after-stop');
  });
});
