/**
 * The runplane binary. Each command loads only what it needs: `worker` speaks HTTP to a server and never loads
 * Nest or the database code; the server's commands load them.
 */
const USAGE = `usage: runplane <command>
  serve                 start the HTTP server (the default) and its embedded worker (RUNPLANE_EMBEDDED_WORKER)
  worker --url URL --token TOKEN [options]
                        run jobs for a server (\`runplane worker --help\` lists the options)
  migrate               apply pending migrations and exit
  create-admin [NAME]   create a global admin and print its token (NAME defaults to admin-<random>)
  set-rate NAME USD_PER_UNIT_HOUR [UNIT]
                        add a new version of a billed resource's rate (NAME one a requestable resource key maps
                        to, e.g. cpu, memory, gpu, disk; UNIT, if given, must be the one it is billed in)`;

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
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
