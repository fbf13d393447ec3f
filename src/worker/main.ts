import pino from 'pino';
import { DataDirLockedError } from '../infra/database/embedded-postgres';
import { parseWorkerArgs, WORKER_USAGE, WorkerUsageError } from './options';
import { Worker, type WorkerLog } from './worker';

/** A pino logger (JSON lines on stdout) at LOG_LEVEL, as the server's. */
export function workerLogger(level = process.env.LOG_LEVEL ?? 'info', name = 'runplane-worker'): WorkerLog {
  const valid = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  return pino({ name, level: valid.includes(level) ? level : 'info' });
}

/**
 * `runplane worker`: runs until SIGINT or SIGTERM, then stops its jobs, reports them and exits 0. Bad options exit 2
 * with the usage; a worker id already running in this work dir, or a token the server refuses, exit 1 with one line.
 */
export async function runWorker(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${WORKER_USAGE}\n`);
    return;
  }
  let options;
  try {
    options = parseWorkerArgs(argv, process.env);
  } catch (err) {
    if (!(err instanceof WorkerUsageError)) throw err;
    process.stderr.write(`runplane worker: ${err.message}\n${WORKER_USAGE}\n`);
    process.exit(2);
  }
  const log = workerLogger();
  const worker = new Worker(options, log);
  try {
    await worker.start();
  } catch (err) {
    const message =
      err instanceof DataDirLockedError
        ? `worker ${options.workerId} already runs: ${err.message}; stop it, or pass another --worker-id or --work-dir`
        : String((err as Error).message ?? err);
    process.stderr.write(`runplane worker: ${message}\n`);
    process.exit(1);
  }
  const c = options.capacity;
  process.stdout.write(
    `runplane worker ${options.workerId}: running jobs for ${options.url} (capacity cpu=${c.cpu}, ` +
      `memory_mib=${c.memory_mib}, gpu=${c.gpu}; memory limits: ${worker.memoryMode}; ` +
      `container runtime: ${options.containerRuntime ?? 'none'})\n`,
  );
  const stop = async (code: number) => {
    await worker.stop();
    process.exit(code);
  };
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      if (stopping) return;
      stopping = true;
      process.stdout.write(`runplane worker: ${signal} received, stopping its jobs\n`);
      void stop(0);
    });
  }
  void worker.fatal.then((err) => {
    process.stderr.write(`runplane worker: ${err.message}\n`);
    if (!stopping) {
      stopping = true;
      void stop(1);
    }
  });
}
