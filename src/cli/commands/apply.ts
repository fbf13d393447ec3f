import { createHash, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import type { Schemas } from '../../client';
import { FINISHED_RUN, getRun, openSession, unwrap, type Session } from '../api';
import { CliError, EXIT, usageError } from '../errors';
import { counts, duration, json, money, stdout, table } from '../format';
import { str, type Context } from '../main';
import { formatErrors, parseRunFile } from '../run-file';
import type { BuiltRun, JobBody } from '../run-file-build';
import { interruptSignal, watchFeed } from '../watch';

type Run = Schemas['RunView'];
type Resource = Schemas['ResourceView'];

/** How a spec key is billed: the resource it maps to and the factor to its unit (as the server's table says). */
const BILLED: Record<string, { resource: string; factor: number }> = {
  cpu: { resource: 'cpu', factor: 1 },
  memory_mib: { resource: 'memory', factor: 1 / 1024 },
  gpu: { resource: 'gpu', factor: 1 },
  disk_gib: { resource: 'disk', factor: 1 },
};

/** USD per hour of one replica of a job at the current rates. */
export function pricePerHour(job: JobBody, rates: Map<string, number>): number {
  let usd = 0;
  for (const [key, quantity] of Object.entries(job.spec.resources)) {
    const billed = BILLED[key];
    if (billed) usd += quantity * billed.factor * (rates.get(billed.resource) ?? 0);
  }
  return usd;
}

const size = (mib: number | undefined) => (mib === undefined ? '-' : mib % 1024 === 0 ? `${mib / 1024}GB` : `${mib}MB`);

/** The plan `apply` shows before submitting. */
export function planText(run: BuiltRun, project: string, resources: Resource[]): string {
  const rates = new Map(resources.map((r) => [r.name, r.rate_usd_per_unit_hour]));
  let total = 0;
  let replicas = 0;
  const rows = run.jobs.map((j) => {
    const r = j.body.spec.resources;
    const n = j.body.replicas ?? 1;
    const price = pricePerHour(j.body, rates) * n;
    total += price;
    replicas += n;
    return [
      j.name,
      j.group || '-',
      String(n),
      String(r.cpu ?? '-'),
      size(r.memory_mib),
      r.gpu === undefined ? '-' : String(r.gpu),
      j.body.depends_on?.join(',') ?? '',
      money(price),
    ];
  });
  const rateText = resources.map((r) => `${r.name} ${money(r.rate_usd_per_unit_hour)}/${r.unit}`).join(', ');
  return (
    `Plan: run ${run.body.run_name ?? '(name given by the server)'} in project ${project}\n\n` +
    table(['JOB', 'GROUP', 'REPLICAS', 'CPU', 'MEMORY', 'GPU', 'DEPENDS ON', 'PRICE/HOUR'], rows, [2, 3, 5, 7]) +
    `\n${run.groups.length} group${run.groups.length === 1 ? '' : 's'}, ${run.jobs.length} job entr${
      run.jobs.length === 1 ? 'y' : 'ies'
    }, ${replicas} job${replicas === 1 ? '' : 's'}; ${money(total)} per hour while all run (rates: ${rateText})\n`
  );
}

/** The same project and request give the same key: a retried apply gets the run the first one made. */
export function idempotencyKey(project: string, body: unknown): string {
  return `apply-${createHash('sha256')
    .update(JSON.stringify([project, body]))
    .digest('hex')
    .slice(0, 40)}`;
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = (await rl.question(question)).trim().toLowerCase();
    return answer === '' || answer === 'y' || answer === 'yes';
  } finally {
    rl.close();
  }
}

export async function apply(ctx: Context): Promise<number> {
  const file = str(ctx.values, 'file') ?? ctx.positionals[0];
  if (!file) throw usageError('missing -f FILE (the run in YAML; - reads standard input)');
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    throw usageError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const s = openSession(str(ctx.values, 'project'));
  const project = s.project();
  // The schema of the server the run goes to, and its current rates for the plan.
  const [schema, resources] = await Promise.all([
    unwrap(s.api.GET('/api/v1/schemas/run-file'), s.url),
    unwrap(s.api.GET('/api/v1/resources'), s.url),
  ]);
  const parsed = parseRunFile(text, schema);
  if (!parsed.ok) {
    process.stderr.write(formatErrors(file === '-' ? '<stdin>' : file, parsed.errors));
    const n = parsed.errors.length;
    throw new CliError(`${n} error${n === 1 ? '' : 's'} in ${file}; nothing was sent`, EXIT.INVALID_FILE);
  }
  const run = parsed.run;
  const plan = planText(run, project, resources.items);
  if (ctx.values['dry-run'] === true) {
    stdout.write(ctx.json ? json(run.body) : plan);
    return EXIT.OK;
  }
  if (!ctx.json) stdout.write(plan);
  if (!ctx.json && ctx.values.yes !== true && process.stdin.isTTY && stdout.isTTY && !(await confirm('Submit? [Y/n] ')))
    return EXIT.OK;

  const key = ctx.values.new === true ? `apply-${randomUUID()}` : idempotencyKey(project, run.body);
  const submitted = await unwrap(
    s.api.POST('/api/v1/projects/{project}/runs', {
      params: { path: { project }, header: { 'Idempotency-Key': key } },
      // The DAG fields (ref, depends_on) go as the contract names them; a server without them refuses with a 400.
      body: run.body as Schemas['SubmitRunDto'],
    }),
    s.url,
  ).catch((err: unknown) => {
    if (err instanceof CliError && /\.(ref|depends_on) should not exist/.test(err.message))
      err.message += ': this server does not take dependencies between jobs yet (remove depends_on from the file)';
    throw err;
  });
  if (ctx.values.detach === true) {
    stdout.write(ctx.json ? json(submitted) : `submitted run ${submitted.run_name} (${submitted.id})\n`);
    return EXIT.OK;
  }
  if (!ctx.json)
    stdout.write(`\nsubmitted run ${submitted.run_name} (${submitted.id}); following it (Ctrl-C stops following)\n`);
  return follow(s, project, submitted, ctx.json);
}

/** Follows a run to its end: exit 0 when done, 1 otherwise; Ctrl-C leaves it running (130). */
async function follow(s: Session, project: string, submitted: Run, asJson: boolean): Promise<number> {
  const started = Date.now();
  const tty = stdout.isTTY && !asJson;
  let last = '';
  let final: Run = submitted;
  const refresh = async (): Promise<boolean> => {
    // Tables and progress lines show no documents; the final --json output is the run as a script would read it.
    final = await getRun(s, project, submitted.id, 1000, asJson ? 'newest' : 'none');
    const status = final.status_message ? `${final.status} (${final.status_message})` : final.status;
    const line = `${status}  ${counts(final.job_counts)}  ${money(final.cost.total_usd)}`;
    if (tty) stdout.write(`\r\x1b[K${final.run_name}  ${line}  ${duration((Date.now() - started) / 1000)}`);
    else if (!asJson && line !== last)
      stdout.write(`${new Date().toISOString().slice(11, 19)}  ${final.run_name}  ${line}\n`);
    last = line;
    return FINISHED_RUN.has(final.status);
  };
  const stop = interruptSignal();
  try {
    await watchFeed(s, project, { runId: submitted.id, types: ['run.status', 'job.status'] }, refresh, stop.signal);
  } finally {
    stop.dispose();
  }
  if (tty) stdout.write('\n');
  if (stop.interrupted()) {
    process.stderr.write(
      `stopped following; run ${final.run_name} keeps running ` +
        `(runplane ps ${final.run_name}, runplane stop ${final.run_name})\n`,
    );
    return EXIT.INTERRUPTED;
  }
  if (asJson) stdout.write(json(final));
  else {
    const took = duration((Date.now() - started) / 1000);
    stdout.write(`run ${final.run_name} ${final.status} after ${took}; cost ${money(final.cost.total_usd)}\n`);
    const bad = final.jobs.filter((j) => j.status !== 'done');
    if (bad.length > 0)
      stdout.write(
        table(
          ['JOB', 'REPLICA', 'STATUS', 'REASON', 'EXIT'],
          bad
            .slice(0, 20)
            .map((j) => [
              j.job_name,
              String(j.replica_num),
              j.status,
              j.termination_reason ?? '',
              j.latest_job_submission?.exit_status == null ? '' : String(j.latest_job_submission.exit_status),
            ]),
        ) + `(runplane logs ${final.run_name} --job NAME shows a job's output)\n`,
      );
  }
  return final.status === 'done' ? EXIT.OK : EXIT.RUN_NOT_DONE;
}
