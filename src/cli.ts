/**
 * The runplane binary. Each command loads only what it needs: the client commands (src/cli/) and `worker` speak
 * HTTP to a server and never load Nest or the database code; the server's commands load them.
 */
const CLIENT_COMMANDS = new Set([
  'login',
  'apply',
  'ps',
  'logs',
  'stop',
  'cancel',
  'groups',
  'cost',
  'billing',
  'projects',
  'users',
  'tokens',
]);

const USAGE = `usage: runplane <command> [options]   (runplane <command> --help for each command's options and examples)

Client commands (talk to a server's API; runplane login first, or set RUNPLANE_URL and RUNPLANE_TOKEN):
  login --url URL       store the server, a token and a default project (config file, mode 0600)
  apply -f FILE         submit a run from a YAML file, show its plan and follow it to the end
  ps [RUN] [-a] [-w]    list runs: status, jobs by status, age, cost (-w watches)
  logs RUN [-f]         print a run's job output (-f follows it live)
  stop RUN [--abort]    stop a run
  cancel RUN GROUP      cancel a job group of a run
  groups RUN            a run's group tree: counts, effective status, who cancelled, cost
  cost RUN              a run's cost so far, by resource
  billing               the project's usage and cost (per-day bars on a terminal)
  projects              list projects; create one; show one with its members
  users                 who you are; create a user (global admins)
  tokens                your tokens: list, create (into a file, never printed), revoke
  --json on every client command prints the API's objects.

Server commands:
  serve                 start the HTTP server (the default) and its embedded worker (RUNPLANE_EMBEDDED_WORKER)
  worker --url URL --token TOKEN [options]
                        run jobs for a server (\`runplane worker --help\` lists the options)
  migrate               apply pending migrations and exit
  create-admin [NAME]   create a global admin and print its token (NAME defaults to admin-<random>)
  set-rate NAME USD_PER_UNIT_HOUR [UNIT]
                        add a new version of a billed resource's rate (NAME one a requestable resource key maps
                        to, e.g. cpu, memory, gpu, disk; UNIT, if given, must be the one it is billed in)

Exit codes of client commands: 0 ok; 1 the run applied (and followed) ended not done; 2 bad usage; 3 invalid run
file; 4 refused by the server (message and code printed); 5 server unreachable or failing; 130 interrupted.`;

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
  if (CLIENT_COMMANDS.has(command)) {
    process.exitCode = await (await import('./cli/main')).runClientCommand(command, rest);
    return;
  }
  switch (command) {
    case 'serve':
      await (await import('./serve')).serve();
      return;
    case 'worker':
      return (await import('./worker/main')).runWorker(rest);
    case 'migrate':
      return (await import('./server-commands')).migrate();
    case 'create-admin':
      return (await import('./server-commands')).createAdmin(rest[0]);
    case 'set-rate':
      if (!(await (await import('./server-commands')).setRate(rest))) {
        process.stderr.write(`${USAGE}\n`);
        process.exit(2);
      }
      return;
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return;
    default:
      process.stderr.write(`unknown command ${command}\n${USAGE}\n`);
      process.exit(2);
  }
}

const argv = process.argv.slice(2);
main(argv).catch(async (err: unknown) => {
  const { exitOnStartupFailure } = await import('./startup-failure');
  exitOnStartupFailure(err, (argv[0] ?? 'serve') === 'serve' ? 'could not start' : `${argv[0]} failed`);
});
