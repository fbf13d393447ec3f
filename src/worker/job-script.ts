/**
 * What a job's process runs, built as text: pure functions, unit-tested.
 *
 * The job's commands go, in order, into a script file run by `bash` (a file, not `-c`: a command may be 64 KiB and
 * there may be 1,000 of them; not stdin: the job's own commands may read stdin). After each command the script
 * checks its exit status and exits with it if it is not 0: the job stops at the first command that fails, and its
 * exit status is that command's. Within a command, bash runs as usual (`set -e` inside one works as in any script);
 * the shell is the same for all commands, so `cd` and variables carry over from one to the next.
 *
 * The process group's leader is a small wrapper shell, which
 * - joins the job's cgroup first (when there is one), so that everything the job starts is inside it;
 * - runs the script in a subshell (a fork of itself, no new bash to start; trapped signals are reset there, and the
 *   script sees no positional parameters);
 * - survives the SIGTERM sent to the group (its trap only defers it), so it can record the job's CPU times (`times`:
 *   the job's shell and every process it waited for) and exit with the job's status (128 + N after signal N).
 * A job with an `image` (on a worker with a container runtime) runs the same script in a container instead: the
 * wrapper then runs the runtime's command.
 */

/**
 * $1 = where to write `times`, $2 = the cgroup.procs file to join (or empty), $3 = the job script to run (or empty:
 * then the rest of the arguments are the command to run).
 */
export const WRAPPER = [
  "trap ':' TERM",
  '__runplane_times=$1; __runplane_cgroup=$2; __runplane_script=$3; shift 3',
  'if [ -n "$__runplane_cgroup" ]; then echo $$ > "$__runplane_cgroup" 2>/dev/null ||',
  '  echo "runplane: could not join the job\'s cgroup: its memory limit is not enforced" >&2; fi',
  'if [ -n "$__runplane_script" ]; then',
  '  (set -- "$__runplane_script"; unset __runplane_times __runplane_cgroup __runplane_script; . "$1")',
  'else "$@"; fi',
  '__runplane_status=$?',
  'times > "$__runplane_times"',
  'exit "$__runplane_status"',
].join('\n');

export interface ContainerRun {
  /** The runtime's command (`docker`, `podman`, …): its CLI takes docker's `run` flags. */
  runtime: string;
  image: string;
  /** The container's name (removed with `<runtime> rm -f` when the job is killed). */
  name: string;
  cpu: number;
  memoryMib: number;
  gpu: number;
}

/**
 * The command that runs a job's script in a container: the working directory mounted at /workdir, the script
 * read-only at /runplane/job.sh, run by bash if the image has it (else sh: the script itself is POSIX), limited to
 * the job's cpu and memory; `--rm` removes it when it ends. The variables are passed by name (`-e NAME`, the value
 * taken from the runtime CLI's own environment, which is the job's): none of them appears on a command line.
 * `variables` are spec.env's and the RUNPLANE_* ones; the image keeps its own PATH and HOME.
 */
export function containerCommand(c: ContainerRun, jobDir: string, script: string, variables: string[]): string[] {
  return [
    c.runtime,
    'run',
    '--rm',
    '--name',
    c.name,
    '--workdir',
    '/workdir',
    '--volume',
    `${jobDir}:/workdir`,
    '--volume',
    `${script}:/runplane/job.sh:ro`,
    '--memory',
    `${c.memoryMib}m`,
    '--memory-swap',
    `${c.memoryMib}m`,
    '--cpus',
    String(c.cpu),
    ...(c.gpu > 0 ? ['--gpus', String(c.gpu)] : []),
    ...variables.flatMap((n) => ['--env', n]),
    '--entrypoint',
    'sh',
    c.image,
    '-c',
    'if command -v bash >/dev/null 2>&1; then exec bash --noprofile --norc /runplane/job.sh; fi; ' +
      'exec sh /runplane/job.sh',
  ];
}

export function jobScript(commands: readonly string[]): string {
  // No positional parameters for the commands (the wrapper sources the script with its path as $1).
  const lines = [`# runplane: ${commands.length} command(s), stopping at the first that fails`, 'set --'];
  for (const command of commands) {
    lines.push(command);
    // On its own line: a command ending in a comment can't swallow it.
    lines.push('__runplane_status=$?; [ "$__runplane_status" -eq 0 ] || exit "$__runplane_status"');
  }
  return `${lines.join('\n')}\n`;
}

/** Parses `times` output: the shell's own user/system times, then its children's. Returns their sum in seconds. */
export function parseTimes(text: string): number | null {
  const values = [...text.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
  if (values.length !== 4 || values.some((v) => !Number.isFinite(v))) return null;
  return values.reduce((a, b) => a + b, 0);
}

/** What identifies a claimed submission to its job (the contract's RUNPLANE_* variables). */
export interface JobIdentity {
  run_id: string;
  run_name: string;
  job_id: string;
  job_num: number;
  replica_num: number;
  submission_num: number;
  job_group_id: number;
}

/**
 * Variables a job inherits from the worker: what a login shell would have. Nothing else of the worker's
 * environment reaches a job: not its token (RUNPLANE_TOKEN), not a server's DATABASE_URL or admin token.
 */
export const INHERITED_VARIABLES = ['PATH', 'HOME', 'USER', 'LOGNAME', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR'];

/** The job's environment: the inherited variables, then `spec.env`, then the RUNPLANE_* ones (which win). */
export function jobEnvironment(
  worker: NodeJS.ProcessEnv,
  specEnv: Record<string, string> | undefined,
  job: JobIdentity,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of INHERITED_VARIABLES) {
    const value = worker[name];
    if (value !== undefined) env[name] = value;
  }
  env.PATH ??= '/usr/local/bin:/usr/bin:/bin';
  Object.assign(env, specEnv ?? {});
  return {
    ...env,
    RUNPLANE_RUN_ID: job.run_id,
    RUNPLANE_RUN_NAME: job.run_name,
    RUNPLANE_JOB_ID: job.job_id,
    RUNPLANE_JOB_NUM: String(job.job_num),
    RUNPLANE_REPLICA_NUM: String(job.replica_num),
    RUNPLANE_SUBMISSION_NUM: String(job.submission_num),
    RUNPLANE_JOB_GROUP_ID: String(job.job_group_id),
  };
}
