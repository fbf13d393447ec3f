import 'reflect-metadata';
import type { Server } from 'node:http';
import { NestFactory } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { AppModule } from './app.module';
import { configureApp } from './configure-app';
import { createHttpAdapter } from './common/http/http-adapter';
import { Env, parseEnv } from './config/env';
import { UsersService } from './modules/users/users.service';
import { startEmbeddedWorker } from './embedded-worker';
import type { Worker } from './worker/worker';

/**
 * Starts the HTTP server: config checked first, migrations applied, first admin created on an empty database; then
 * the embedded worker, unless RUNPLANE_EMBEDDED_WORKER=false.
 */
export async function serve(): Promise<NestFastifyApplication> {
  const env = parseEnv(process.env); // fail on bad config before touching any database
  // A failed start is one line on stderr (see startup-failure.ts), not Nest's log of the start-up and a stack:
  // errors come back to the caller, and the start-up's logs, buffered until the server listens, are dropped.
  const app = await NestFactory.create<NestFastifyApplication>(AppModule, createHttpAdapter(), {
    bodyParser: false,
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
  closeOnSignals(app, embedded, env.RUNPLANE_SHUTDOWN_GRACE_SECONDS * 1000);
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
 * SIGINT/SIGTERM: the embedded worker stops its jobs and reports them (while the server still answers); then the
 * server stops listening (behind a load balancer new connections are refused and go to the other instances) and the
 * app closes: followers' event streams end, the requests in flight finish (the pool closes only after them), for at
 * most `graceMs`, after which open connections are cut; then the process exits 0.
 */
function closeOnSignals(app: NestFastifyApplication, embedded: { worker?: Worker }, graceMs: number): void {
  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    process.stdout.write(`runplane: ${signal} received, shutting down\n`);
    Promise.resolve(embedded.worker?.stop())
      .catch((err: unknown) =>
        process.stderr.write(`runplane: the embedded worker did not stop cleanly: ${String(err)}\n`),
      )
      .then(() => closeDraining(app, graceMs))
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

/** Stops listening, then closes the app (which waits for every connection to end), cutting them after `graceMs`. */
async function closeDraining(app: NestFastifyApplication, graceMs: number): Promise<void> {
  const server = app.getHttpServer() as Server;
  if (server.listening) server.close(); // the app's close below waits for the connections to end
  // Keep-alive connections are closed as they fall idle, so that they do not hold the close up.
  const idler = setInterval(() => server.closeIdleConnections(), 100);
  const late = setTimeout(() => {
    process.stderr.write(`runplane: requests still open after ${graceMs} ms; closing them\n`);
    server.closeAllConnections();
  }, graceMs);
  try {
    await app.close();
  } finally {
    clearInterval(idler);
    clearTimeout(late);
  }
}
