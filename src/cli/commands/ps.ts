import type { Schemas } from '../../client';
import { FINISHED_RUN, findRun, getRun, openSession, unwrap, type Session } from '../api';
import { EXIT, usageError } from '../errors';
import { age, counts, json, money, stdout, table } from '../format';
import { int, str, type Context } from '../main';
import { interruptSignal, watchFeed } from '../watch';

type Run = Schemas['RunView'];

/** Runs as `dstack ps` shows them: run, status, jobs by status, age, cost (and the project when listing several). */
export function runsTable(runs: Run[], withProject: boolean, now = Date.now()): string {
  if (runs.length === 0) return 'no runs\n';
  return table(
    ['RUN', ...(withProject ? ['PROJECT'] : []), 'STATUS', 'JOBS', 'AGE', 'COST'],
    runs.map((r) => [
      r.run_name,
      ...(withProject ? [r.project] : []),
      r.status_message ? `${r.status} (${r.status_message})` : r.status,
      counts(r.job_counts),
      age(r.submitted_at, now),
      money(r.cost.total_usd),
    ]),
  );
}

/** One run and its jobs (the first 1,000; the API keeps the rest reachable). */
export function runDetail(r: Run, now = Date.now()): string {
  const head = runsTable([r], false, now);
  const jobs = table(
    ['JOB', 'REPLICA', 'STATUS', 'REASON', 'ATTEMPTS', 'EXIT', 'COST'],
    r.jobs.map((j) => [
      j.job_name,
      String(j.replica_num),
      j.status,
      j.termination_reason ?? '',
      String(j.submission_count),
      j.latest_job_submission?.exit_status == null ? '' : String(j.latest_job_submission.exit_status),
      money(j.latest_job_submission?.cost_usd ?? 0),
    ]),
    [1, 4, 5, 6],
  );
  return `${head}\n${jobs}${r.jobs_truncated ? `… and more jobs (${r.jobs.length} shown)\n` : ''}`;
}

async function listRuns(s: Session, project: string | undefined, all: boolean, limit: number): Promise<Run[]> {
  const query = { limit, include_jobs: false, ...(all ? {} : { only_active: true }) };
  const page = project
    ? await unwrap(s.api.GET('/api/v1/projects/{project}/runs', { params: { path: { project }, query } }), s.url)
    : await unwrap(s.api.GET('/api/v1/runs', { params: { query } }), s.url);
  return page.items;
}

export async function ps(ctx: Context): Promise<number> {
  const s = openSession(str(ctx.values, 'project'));
  const project = s.defaultProject;
  const limit = int(ctx.values, 'n') ?? 20;
  if (limit < 1 || limit > 100) throw usageError('-n is 1 to 100');
  const ref = ctx.positionals[0];
  const all = ctx.values.all === true;
  if (ref && !project) s.project(); // the usage error saying how to name one

  if (ctx.values.watch !== true) {
    if (ref) {
      const run = await findRun(s, s.project(), ref, 1000, ctx.json ? 'newest' : 'none');
      stdout.write(ctx.json ? json(run) : runDetail(run));
    } else {
      const runs = await listRuns(s, project, all, limit);
      stdout.write(ctx.json ? json(runs) : runsTable(runs, !project));
    }
    return EXIT.OK;
  }

  const p = s.project(); // the event feed is a project's
  const first = ref ? await findRun(s, p, ref, 0) : undefined;
  const shown = new Set<string>();
  const seen = new Map<string, string>();
  const refresh = async (): Promise<boolean> => {
    let runs: Run[];
    if (first) runs = [await getRun(s, p, first.id, ctx.json ? 0 : 1000, 'none')];
    else {
      runs = (await listRuns(s, p, true, limit)).filter((r) => shown.has(r.id) || all || !FINISHED_RUN.has(r.status));
      runs.forEach((r) => shown.add(r.id));
    }
    const over = runs.every((r) => FINISHED_RUN.has(r.status));
    if (ctx.json) {
      // One JSON line per change of a run (status or jobs by status), for scripts.
      for (const r of runs) {
        const key = `${r.status}|${JSON.stringify(r.job_counts)}`;
        if (seen.get(r.id) !== key) stdout.write(`${JSON.stringify(r)}\n`);
        seen.set(r.id, key);
      }
    } else if (stdout.isTTY) {
      const body = first ? runDetail(runs[0]) : runsTable(runs, false);
      stdout.write(`\x1b[H\x1b[2J${body}\n${over ? 'every run shown has ended' : 'watching (Ctrl-C to stop)'}\n`);
    } else {
      const now = new Date().toISOString().slice(11, 19);
      for (const r of runs) {
        const line = `${r.run_name}  ${r.status}  ${counts(r.job_counts)}  ${money(r.cost.total_usd)}`;
        if (seen.get(r.id) !== line) stdout.write(`${now}  ${line}\n`);
        seen.set(r.id, line);
      }
    }
    return over;
  };
  const stop = interruptSignal();
  try {
    await watchFeed(s, p, { runId: first?.id, types: ['run.status', 'job.status'] }, refresh, stop.signal);
  } finally {
    stop.dispose();
  }
  return stop.interrupted() ? EXIT.INTERRUPTED : EXIT.OK;
}
