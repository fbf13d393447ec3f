import { rmSync } from 'node:fs';
import { groupAlive } from '../../src/worker/proc';
import type { Worker } from '../../src/worker/worker';
import { makeProject, makeRun, RunBody } from '../support/factories';
import { bytesOf, followSse, LogItem, readLog } from '../support/logs';
import { listen, startWorker, tempWorkDir, waitFor } from '../support/runplane-worker';
import { createTestApp, TestApp, TestUser } from '../support/test-app';
import { invariants } from '../support/workers';

interface Submission {
  id: string;
  submission_num: number;
  status: string;
  termination_reason: string | null;
  exit_status: number | null;
  provisioning_data: Record<string, unknown> | null;
}
interface Job {
  id: string;
  status: string;
  submission_count: number;
  job_submissions: Submission[];
}

const LINES = 200_000;
const QUOTA = 100_000;

/**
 * Real jobs run by the runplane worker, their output shipped by its LogShipper (no hand-fed chunks, no capturing
 * sink) and read back through the public logs route: 200,000 lines on each of stdout and stderr, byte for byte and
 * in order, paged and followed; each attempt's log apart; the per-submission quota ending the job.
 */
const linux = process.platform === 'linux' ? describe : describe.skip;
linux('the runplane worker ships what jobs print; the logs route reads it back', () => {
  let t: TestApp;
  let url: string;
  let owner: TestUser;
  let service: TestUser;
  let admin: TestUser;
  let project: string;
  let workDir: string;
  const workers: Worker[] = [];
  beforeAll(async () => {
    t = await createTestApp({}, { ownDatabase: 'workerlogs' });
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

  const worker = async (app: TestApp, appUrl: string, account: TestUser, workerId: string) => {
    // The default sinks: each job's output goes through a LogShipper to the server's log route.
    const w = await startWorker({ url: appUrl, token: account.token, workerId, workDir });
    workers.push(w);
    return w;
  };
  const view = async (app: TestApp, runId: string) =>
    (await app.http.get(`/api/v1/projects/${project}/runs/${runId}`).set(owner.auth).expect(200)).body;
  const until = (app: TestApp, runId: string, status: string) =>
    waitFor(
      `run ${runId} ${status}`,
      async () => {
        const run = await view(app, runId);
        return run.status === status && (run as { jobs: Job[] });
      },
      120_000,
    );
  const logsPath = (runId: string, jobId: string) => `/api/v1/projects/${project}/runs/${runId}/jobs/${jobId}/logs`;
  const spec = (commands: string[]) => ({ commands, resources: { cpu: 1, memory_mib: 256 } });
  const submit = (app: TestApp, body: RunBody) => makeRun(app, owner, project, { priority: 1000, ...body });

  it('a job printing 200,000 lines on each stream, interleaved: both read back byte for byte, in order', async () => {
    const run = await submit(t, {
      jobs: [
        {
          spec: spec([
            `for ((i=0;i<${LINES};i++)); do echo "out $i héllo"; echo "err $i" >&2; done`,
            // Bytes that are not text come back as they were, too.
            "printf '\\xff\\xfe\\x00end\\n'",
          ]),
        },
      ],
    });
    const path = logsPath(run.id, run.jobs[0].id);
    // Followed from before the job starts until the submission ends.
    const follow = followSse(url, path, owner.auth);
    await worker(t, url, service, 'w-lines');
    const done = await until(t, run.id, 'done');
    const [s] = (done.jobs as Job[])[0].job_submissions;
    expect(s).toMatchObject({ status: 'done', termination_reason: 'done_by_runner', exit_status: 0 });

    const expected = {
      stdout: Buffer.concat([
        Buffer.from(Array.from({ length: LINES }, (_, i) => `out ${i} héllo\n`).join('')),
        Buffer.from([0xff, 0xfe, 0x00, ...Buffer.from('end\n')]),
      ]),
      stderr: Buffer.from(Array.from({ length: LINES }, (_, i) => `err ${i}\n`).join('')),
    };
    // Pages: each stream's chunks contiguous from byte 0 (readLog checks), the bytes those printed.
    const log = await readLog(t, owner, path);
    expect(log.stdout.length).toBe(expected.stdout.length);
    expect(log.stdout.equals(expected.stdout)).toBe(true);
    expect(log.stderr.length).toBe(expected.stderr.length);
    expect(log.stderr.equals(expected.stderr)).toBe(true);
    expect(log.lastCursor).toBeNull();
    // Both streams in the order written: their chunks interleave (they were shipped side by side), not one after
    // the other; and the stored write order is the items' order.
    const firstErr = log.items.findIndex((i) => i.stream === 'stderr');
    const lastOut = log.items.map((i) => i.stream).lastIndexOf('stdout');
    expect(firstErr).toBeGreaterThanOrEqual(0);
    expect(firstErr).toBeLessThan(lastOut);
    const seqs: { seq: number }[] = await t.dataSource.query(
      `SELECT seq FROM log_chunks WHERE submission_id = $1 ORDER BY seq`,
      [s.id],
    );
    expect(seqs.map((r) => r.seq)).toEqual(log.items.map((_, k) => k));
    // One stream alone, in byte order, reads the same.
    expect((await readLog(t, owner, path, { stream: 'stderr' })).stderr.equals(expected.stderr)).toBe(true);
    // Only the chunk holding \xff\xfe\x00 is base64; the rest read as text.
    expect(log.items.filter((i) => i.encoding === 'base64').length).toBe(1);

    // The follower saw the same chunks in the same order, then the end of the submission.
    const followed = await follow.done;
    expect(followed.status).toBe(200);
    const events = follow.events;
    const chunks = events.filter((e) => e.event === 'chunk').map((e) => JSON.parse(e.data) as LogItem);
    expect(chunks.map((c) => [c.stream, c.offset])).toEqual(log.items.map((i) => [i.stream, i.offset]));
    const joined = (stream: string) => Buffer.concat(chunks.filter((c) => c.stream === stream).map(bytesOf));
    expect(joined('stdout').equals(expected.stdout)).toBe(true);
    expect(joined('stderr').equals(expected.stderr)).toBe(true);
    expect(events[events.length - 1].event).toBe('end');
    expect(JSON.parse(events[events.length - 1].data)).toMatchObject({ status: 'done', submission_num: 0 });
  }, 180_000);

  it("exit 3 retried under the policy: each attempt's log kept apart, the latest by default", async () => {
    const run = await submit(t, {
      retry: { on_events: ['error'], max_attempts: 3 },
      jobs: [
        {
          spec: spec(['echo "attempt $RUNPLANE_SUBMISSION_NUM"', 'echo "oops $RUNPLANE_SUBMISSION_NUM" >&2', 'exit 3']),
        },
      ],
    });
    await worker(t, url, service, 'w-retry');
    const failed = await until(t, run.id, 'failed');
    const [job] = failed.jobs as Job[];
    expect(job.job_submissions.map((s) => [s.submission_num, s.status, s.exit_status])).toEqual([
      [0, 'failed', 3],
      [1, 'failed', 3],
      [2, 'failed', 3],
    ]);
    const path = logsPath(run.id, job.id);
    for (const n of [0, 1, 2]) {
      const log = await readLog(t, owner, path, { submission_num: n });
      expect([log.stdout.toString(), log.stderr.toString()]).toEqual([`attempt ${n}\n`, `oops ${n}\n`]);
    }
    expect((await readLog(t, owner, path)).stdout.toString()).toBe('attempt 2\n');
  });

  describe('with a small log quota', () => {
    let q: TestApp;
    let qUrl: string;
    let qService: TestUser;
    beforeAll(async () => {
      q = await createTestApp({ RUNPLANE_LOG_QUOTA_BYTES: String(QUOTA) }, { ownDatabase: 'workerlogs' });
      qUrl = await listen(q);
      qService = await q.user('service');
    });
    afterAll(() => q.close());

    it('a job printing past the quota is stopped, failed/log_quota_exceeded, its log kept to the quota', async () => {
      const run = await submit(q, {
        retry: { on_events: ['error'], max_attempts: 3 },
        jobs: [{ spec: spec(['while :; do echo "line of output"; done']) }],
      });
      await worker(q, qUrl, qService, 'w-quota');
      const failed = await until(q, run.id, 'failed');
      const [job] = failed.jobs as Job[];
      // The job's own doing: never retried.
      expect(job.submission_count).toBe(1);
      const [s] = job.job_submissions;
      expect(s).toMatchObject({ status: 'failed', termination_reason: 'log_quota_exceeded' });
      expect(groupAlive(Number(s.provisioning_data?.pid))).toBe(false);
      const log = await readLog(q, owner, logsPath(run.id, job.id));
      // The quota's worth is kept, exactly: the part of the refused chunk that fitted went on its own.
      expect(log.stdout.length + log.stderr.length).toBe(QUOTA);
      expect(log.stdout.toString()).toBe('line of output\n'.repeat(QUOTA).slice(0, QUOTA));
    });
  });
});
