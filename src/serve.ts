import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';
import { configureApp } from './configure-app';
import { Env, parseEnv } from './config/env';
import { UsersService } from './modules/users/users.service';
import { startEmbeddedWorker } from './embedded-worker';
import type { Worker } from './worker/worker';

/**
 * Starts the HTTP server: config checked first, migrations applied, first admin created on an empty database; then
 * the embedded worker, unless RUNPLANE_EMBEDDED_WORKER=false.
 */
export async function serve(): Promise<NestExpressApplication> {
  const env = parseEnv(process.env); // fail on bad config before touching any database
  // A failed start is one line on stderr (see startup-failure.ts), not Nest's log of the start-up and a stack:
  // errors come back to the caller, and the start-up's logs, buffered until the server listens, are dropped.
  const app = await NestFactory.create<NestExpressApplication>(AppModule, {
    bufferLogs: true,
    autoFlushLogs: false,
    abortOnError: false,
  });
  try {
    configureApp(app);
    const admin = await app.get(UsersService).bootstrapAdmin(app.get(Env).RUNPLANE_ADMIN_TOKEN);
    if (admin) {
      const shown = env.RUNPLANE_ADMIN_TOKEN ? '(the value of RUNPLANE_ADMIN_TOKEN)' : admin.token;
      process.stdout.write(
        `runplane: created the first admin user "${admin.user.name}"; its token, shown only now: ${shown}\n`,
      );
    }
    await app.listen(env.PORT, env.HOST);
    app.flushLogs();
  } catch (err) {
    // Close the pool and the embedded database (flushed, data directory unlocked) before the caller exits.
    await app.close().catch(() => undefined);
    throw err;
  }
  const embedded: { worker?: Worker } = {};
  closeOnSignals(app, embedded);
  process.stdout.write(
    `runplane: listening on ${await app.getUrl()} ` +
      `(${env.DATABASE_URL ? 'PostgreSQL at DATABASE_URL' : `embedded PostgreSQL in ${env.RUNPLANE_DATA_DIR}`})\n`,
  );
  if (env.RUNPLANE_EMBEDDED_WORKER) {
    try {
      const worker = await startEmbeddedWorker(app, env);
      embedded.worker = worker;
      const c = worker.options.capacity;
      process.stdout.write(
        `runplane: embedded worker ${worker.options.workerId} runs jobs as local processes of this user ` +
          `(capacity cpu=${c.cpu}, memory_mib=${c.memory_mib}; memory limits: ${worker.memoryMode}; ` +
          `work dir ${worker.options.workDir}); RUNPLANE_EMBEDDED_WORKER=false turns it off\n`,
      );
    } catch (err) {
      // The server still serves: workers elsewhere can run its jobs.
      process.stderr.write(`runplane: the embedded worker did not start: ${(err as Error).message}\n`);
    }
  }
  return app;
}

/**
 * SIGINT/SIGTERM: the embedded worker stops its jobs and reports them (while the server still answers), then the
 * server stops taking requests, finishes the ones in flight, closes the pool and the embedded database, exits 0.
 */
function closeOnSignals(app: NestExpressApplication, embedded: { worker?: Worker }): void {
  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    process.stdout.write(`runplane: ${signal} received, shutting down\n`);
    Promise.resolve(embedded.worker?.stop())
      .catch((err: unknown) =>
        process.stderr.write(`runplane: the embedded worker did not stop cleanly: ${String(err)}\n`),
      )
      .then(() => app.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          process.stderr.write(`runplane: shutdown failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
