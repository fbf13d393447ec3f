import type { Schemas } from '../../client';
import { FINISHED_RUN, findRun, getRun, openSession, unwrap, type Session } from '../api';
import { CliError, EXIT } from '../errors';
import { int, str, type Context } from '../main';
import { readSse } from '../sse';
import { interruptSignal } from '../watch';

type Job = Schemas['JobView'];
type Chunk = Schemas['LogChunkView'];

/** Writes chunks to stdout/stderr as they are; with several jobs, each line is prefixed with `job/replica| `. */
class Printer {
  private readonly partial = new Map<string, string>();
  constructor(
    private readonly prefixed: boolean,
    private readonly json: boolean,
  ) {}

  chunk(job: Job, c: Chunk): void {
    const out = c.stream === 'stderr' ? process.stderr : process.stdout;
    if (this.json) {
      process.stdout.write(
        `${JSON.stringify({ job_id: job.id, job_name: job.job_name, replica_num: job.replica_num, ...c })}\n`,
      );
      return;
    }
    const bytes = c.encoding === 'base64' ? Buffer.from(c.data, 'base64') : Buffer.from(c.data, 'utf8');
    if (!this.prefixed) {
      out.write(bytes);
      return;
    }
    const key = `${job.id}:${c.stream}`;
    const text = (this.partial.get(key) ?? '') + bytes.toString('utf8');
    const lines = text.split('\n');
    this.partial.set(key, lines.pop() ?? '');
    const tag = `${job.job_name}/${job.replica_num}| `;
    if (lines.length) out.write(lines.map((l) => `${tag}${l}\n`).join(''));
  }

  /** The last line of each stream, when it had no newline. */
  flush(jobs: Job[]): void {
    for (const j of jobs)
      for (const stream of ['stdout', 'stderr'] as const) {
        const rest = this.partial.get(`${j.id}:${stream}`);
        if (rest)
          (stream === 'stderr' ? process.stderr : process.stdout).write(`${j.job_name}/${j.replica_num}| ${rest}\n`);
        this.partial.delete(`${j.id}:${stream}`);
      }
  }
}

export async function logs(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  const ref = ctx.positionals[0];
  if (!ref) throw new CliError('missing the run (name or id); see runplane logs --help', EXIT.USAGE);
  const run = await findRun(s, project, ref, 1000, 'none');
  const jobName = str(ctx.values, 'job');
  const replica = int(ctx.values, 'replica');
  const submission = int(ctx.values, 'submission');
  const selected = (jobs: Job[]) =>
    jobs.filter(
      (j) => (jobName === undefined || j.job_name === jobName) && (replica === undefined || j.replica_num === replica),
    );
  let jobs = selected(run.jobs);
  if (jobs.length === 0)
    throw new CliError(
      `run ${run.run_name} has no job${jobName ? ` named ${jobName}` : ''}` +
        (replica !== undefined ? ` with replica ${replica}` : ''),
      EXIT.REFUSED,
    );
  const printer = new Printer(jobs.length > 1, ctx.json);

  if (ctx.values.follow !== true) {
    for (const j of jobs) {
      let cursor: string | undefined;
      do {
        const page = (await unwrap(
          s.api.GET('/api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/logs', {
            params: {
              path: { project, runId: run.id, jobId: j.id },
              query: {
                limit: 100,
                ...(cursor ? { cursor } : {}),
                ...(submission !== undefined ? { submission_num: submission } : {}),
              },
            },
          }),
          s.url,
        )) as Schemas['LogChunkPage'];
        for (const c of page.items) printer.chunk(j, c);
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
    }
    printer.flush(jobs);
    return EXIT.OK;
  }

  // Follow: every selected job's current submission at once; when all have ended, the run is read again, and a job
  // retried meanwhile (a new submission) is followed in turn, until the run has finished.
  const stop = interruptSignal();
  const followed = new Map<string, number>();
  try {
    for (;;) {
      const todo = jobs.filter((j) => {
        const num = submission ?? j.latest_job_submission?.submission_num ?? 0;
        return followed.get(j.id) !== num || !finished(j);
      });
      await Promise.all(
        todo.map(async (j) => {
          const num = submission ?? j.latest_job_submission?.submission_num ?? 0;
          followed.set(j.id, num);
          await followOne(s, project, run.id, j, num, printer, stop.signal);
        }),
      );
      if (stop.interrupted() || submission !== undefined) break;
      const now = await getRun(s, project, run.id, 1000, 'none');
      jobs = selected(now.jobs);
      if (
        FINISHED_RUN.has(now.status) &&
        jobs.every((j) => followed.get(j.id) === j.latest_job_submission?.submission_num)
      )
        break;
      await new Promise((r) => setTimeout(r, 500));
    }
  } finally {
    stop.dispose();
    printer.flush(jobs);
  }
  return stop.interrupted() ? EXIT.INTERRUPTED : EXIT.OK;
}

const finished = (j: Job) =>
  ['done', 'failed', 'terminated', 'aborted'].includes(j.latest_job_submission?.status ?? '');

async function followOne(
  s: Session,
  project: string,
  runId: string,
  job: Job,
  submissionNum: number,
  printer: Printer,
  signal: AbortSignal,
): Promise<void> {
  let lastId: string | undefined;
  for (let attempt = 0; !signal.aborted && attempt < 30; attempt++) {
    let res;
    try {
      res = await s.api.GET('/api/v1/projects/{project}/runs/{runId}/jobs/{jobId}/logs', {
        params: {
          path: { project, runId, jobId: job.id },
          query: { follow: true, submission_num: submissionNum },
          header: lastId ? { 'Last-Event-ID': lastId } : {},
        },
        parseAs: 'stream',
        signal,
      });
    } catch {
      if (signal.aborted) return;
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    if (!res.response.ok || !res.data) await unwrap(Promise.resolve(res), s.url);
    try {
      for await (const ev of readSse(res.data as ReadableStream<Uint8Array>)) {
        if (ev.event === 'end') return;
        if (ev.event !== 'chunk') continue;
        if (ev.id) lastId = ev.id;
        printer.chunk(job, JSON.parse(ev.data) as Chunk);
      }
    } catch {
      // dropped: resume from the last chunk
    }
  }
}
