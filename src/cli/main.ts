import { parseArgs, type ParseArgsConfig } from 'node:util';
import { CliError, EXIT, redact, usageError } from './errors';

/**
 * The client commands of the runplane binary. They talk to a server's public API only (the typed client) and never
 * load Nest: each command's code is imported when it runs, so `--help` loads this file alone.
 */

type Options = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | boolean | string[] | undefined>;

export interface Context {
  values: Values;
  positionals: string[];
  json: boolean;
}

interface CommandDef {
  summary: string;
  usage: string;
  details?: string;
  examples: string[];
  options: Options;
  /** The command's code, loaded when it runs; returns the exit code. */
  load: () => Promise<(ctx: Context) => Promise<number>>;
}

const project = { project: { type: 'string', short: 'p' } } as const;
const common = { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;

const COMMANDS: Record<string, CommandDef> = {
  login: {
    summary: 'store the server, a token and a default project (config file, mode 0600)',
    usage: 'runplane login --url URL [--token TOKEN] [--project NAME]',
    details:
      'Without --token the token is read from standard input (so that it stays out of the shell history), else the\n' +
      'one already stored is kept (to change the project alone). The token\n' +
      'is checked with the server, then stored with the URL and project in the config file (RUNPLANE_CONFIG, else\n' +
      '~/.config/runplane/config.json), readable by you alone. RUNPLANE_URL, RUNPLANE_TOKEN and RUNPLANE_PROJECT\n' +
      'override the file. The token is never printed.',
    examples: [
      'runplane login --url http://127.0.0.1:3000 --project demo < token.txt',
      'runplane login --url https://runplane.example --token "$RUNPLANE_TOKEN" --project ml',
      'runplane login --project other',
    ],
    options: { url: { type: 'string' }, token: { type: 'string' }, ...project },
    load: async () => (await import('./commands/account')).login,
  },
  apply: {
    summary: 'submit a run from a YAML file, show its plan and follow it to the end',
    usage: 'runplane apply -f FILE [--detach] [--yes] [--dry-run] [--new] [--project NAME]',
    details:
      'The file is checked against the schema the server publishes; every error is listed as FILE:LINE:COL before\n' +
      'anything is sent (exit 3). apply prints the plan (jobs, groups, resources, price per hour at current rates),\n' +
      'submits with an Idempotency-Key derived from the project and the request (a retried apply returns the same\n' +
      'run; --new submits another), then follows the run: jobs by status on a terminal, one line per change when\n' +
      'piped. Exit 0 when the run is done, 1 when it failed or was stopped; --detach returns once submitted.\n' +
      'Ctrl-C stops following only: the run keeps running (exit 130).',
    examples: [
      'runplane apply -f run.yml',
      'runplane apply -f run.yml --detach --json',
      'runplane apply -f run.yml --dry-run',
    ],
    options: {
      file: { type: 'string', short: 'f' },
      detach: { type: 'boolean', short: 'd' },
      yes: { type: 'boolean', short: 'y' },
      'dry-run': { type: 'boolean' },
      new: { type: 'boolean' },
      ...project,
    },
    load: async () => (await import('./commands/apply')).apply,
  },
  ps: {
    summary: 'list runs: status, jobs by status, age, cost',
    usage: 'runplane ps [RUN] [-a] [-w] [-n N] [--project NAME]',
    details:
      'Active runs of the project (without a project: of every project you may see); -a adds finished runs (the\n' +
      'newest -n, default 20). With RUN, that run and its jobs. -w watches from the event feed, redrawing on a\n' +
      'terminal and printing a line per change when piped, until none of the runs shown is active.',
    examples: ['runplane ps', 'runplane ps -a -n 50', 'runplane ps sweep-1 -w', 'runplane ps --json | jq ".[].status"'],
    options: {
      all: { type: 'boolean', short: 'a' },
      watch: { type: 'boolean', short: 'w' },
      n: { type: 'string', short: 'n' },
      ...project,
    },
    load: async () => (await import('./commands/ps')).ps,
  },
  logs: {
    summary: "print a run's job output (-f follows it live until the run ends)",
    usage: 'runplane logs RUN [--job NAME] [--replica N] [--submission N] [-f] [--project NAME]',
    details:
      "Every selected job's output (default: all the run's jobs; each line prefixed with job/replica when there are\n" +
      'several), stdout to stdout and stderr to stderr, of the latest submission unless --submission N.',
    examples: [
      'runplane logs sweep-1',
      'runplane logs sweep-1 --job train --replica 2 -f',
      'runplane logs sweep-1 --json',
    ],
    options: {
      job: { type: 'string' },
      replica: { type: 'string' },
      submission: { type: 'string' },
      follow: { type: 'boolean', short: 'f' },
      ...project,
    },
    load: async () => (await import('./commands/logs')).logs,
  },
  stop: {
    summary: 'stop a run (its queued and running jobs end as terminated)',
    usage: 'runplane stop RUN [--abort] [--project NAME]',
    details: '--abort also stops always_run jobs, and records the reason aborted_by_user.',
    examples: ['runplane stop sweep-1', 'runplane stop 0b9e…-uuid --abort'],
    options: { abort: { type: 'boolean' }, ...project },
    load: async () => (await import('./commands/runs')).stop,
  },
  cancel: {
    summary: 'cancel a job group of a run (its subtree)',
    usage: 'runplane cancel RUN GROUP [--reason TEXT] [--project NAME]',
    details: 'GROUP is the group id (runplane groups RUN shows them) or the name the run file gave it.',
    examples: ['runplane cancel sweep-1 small', 'runplane cancel sweep-1 3 --reason "bad parameters"'],
    options: { reason: { type: 'string' }, ...project },
    load: async () => (await import('./commands/runs')).cancel,
  },
  groups: {
    summary: "a run's group tree: counts, effective status, who cancelled, cost",
    usage: 'runplane groups RUN [--project NAME]',
    examples: ['runplane groups sweep-1', 'runplane groups sweep-1 --json'],
    options: { ...project },
    load: async () => (await import('./commands/runs')).groups,
  },
  cost: {
    summary: "a run's cost so far, by resource",
    usage: 'runplane cost RUN [--project NAME]',
    examples: ['runplane cost sweep-1'],
    options: { ...project },
    load: async () => (await import('./commands/runs')).cost,
  },
  billing: {
    summary: "the project's usage and cost (per-day bars on a terminal)",
    usage: 'runplane billing [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--by user,day,resource] [--project NAME]',
    details: 'Default: the last 30 days (UTC) by day. Bars on a terminal when grouped by day alone; a table otherwise.',
    examples: ['runplane billing', 'runplane billing --from 2026-12-01 --by user,resource', 'runplane billing --json'],
    options: { from: { type: 'string' }, to: { type: 'string' }, by: { type: 'string' }, ...project },
    load: async () => (await import('./commands/billing')).billing,
  },
  projects: {
    summary: 'list projects; create one; show one with its members',
    usage: 'runplane projects [create NAME [--billing-limit USD] | show NAME]',
    examples: ['runplane projects', 'runplane projects create ml --billing-limit 100', 'runplane projects show ml'],
    options: { 'billing-limit': { type: 'string' } },
    load: async () => (await import('./commands/account')).projects,
  },
  users: {
    summary: 'who you are; create a user (global admins)',
    usage: 'runplane users [create NAME [--admin] --token-file FILE]',
    details: "A new user's token is written to --token-file (mode 0600), never printed.",
    examples: ['runplane users', 'runplane users create alice --token-file alice.token'],
    options: { admin: { type: 'boolean' }, 'token-file': { type: 'string' } },
    load: async () => (await import('./commands/account')).users,
  },
  tokens: {
    summary: 'your tokens: list, create (into a file), revoke',
    usage: 'runplane tokens [create --token-file FILE | create --login | revoke ID]',
    details:
      'Tokens are listed by id and date; a secret is never printed: create writes it to --token-file (mode 0600),\n' +
      'or with --login into the config file in place of the current one.',
    examples: ['runplane tokens', 'runplane tokens create --token-file ci.token', 'runplane tokens revoke 5c1e…'],
    options: { 'token-file': { type: 'string' }, login: { type: 'boolean' } },
    load: async () => (await import('./commands/account')).tokens,
  },
};

function help(c: CommandDef): string {
  return (
    `usage: ${c.usage}\n\n${c.summary}.\n` +
    (c.details ? `\n${c.details}\n` : '') +
    `\nOptions common to client commands:\n  --json                the API's objects as JSON, for scripts\n` +
    `  -h, --help            this help\n` +
    `\nExamples:\n${c.examples.map((e) => `  ${e}`).join('\n')}\n` +
    `\nExit codes: 0 ok, 1 the run ended not done (apply), 2 usage, 3 invalid run file, 4 refused by the server,\n` +
    `5 server unreachable or failing, 130 interrupted.\n`
  );
}

/** Runs client command `name`; returns its exit code (errors are printed here, one line, tokens redacted). */
export async function runClientCommand(name: string, argv: string[]): Promise<number> {
  const def = COMMANDS[name];
  try {
    let parsed: { values: Values; positionals: string[] };
    try {
      parsed = parseArgs({ args: argv, options: { ...def.options, ...common }, allowPositionals: true, strict: true });
    } catch (err) {
      throw usageError(`${(err as Error).message.split(/\. |\n/)[0]}\nusage: ${def.usage} (runplane ${name} --help)`);
    }
    if (parsed.values.help) {
      process.stdout.write(help(def));
      return EXIT.OK;
    }
    const run = await def.load();
    return await run({ values: parsed.values, positionals: parsed.positionals, json: parsed.values.json === true });
  } catch (err) {
    if (err instanceof CliError) {
      process.stderr.write(redact(`runplane ${name}: ${err.message}\n`));
      return err.exitCode;
    }
    process.stderr.write(redact(`runplane ${name}: unexpected error: ${(err as Error).stack ?? String(err)}\n`));
    return EXIT.UNAVAILABLE;
  }
}

/** The string value of an option, or undefined. */
export const str = (v: Values, k: string): string | undefined =>
  typeof v[k] === 'string' ? (v[k] as string) : undefined;

/** An integer option (>= 0), or a usage error naming it. */
export function int(v: Values, k: string): number | undefined {
  const s = str(v, k);
  if (s === undefined) return undefined;
  if (!/^\d+$/.test(s)) throw usageError(`--${k} must be a whole number, got ${JSON.stringify(s)}`);
  return Number(s);
}

/** The positional argument at `i`, or a usage error. */
export function arg(ctx: Context, i: number, what: string): string {
  const v = ctx.positionals[i];
  if (v === undefined) throw usageError(`missing ${what} (see --help)`);
  return v;
}
