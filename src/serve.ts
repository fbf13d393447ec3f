import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module';
import { configureApp } from './configure-app';
import { Env, parseEnv } from './config/env';
import { UsersService } from './modules/users/users.service';

/** Starts the HTTP server: config checked first, migrations applied, first admin created on an empty database. */
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
  closeOnSignals(app);
  process.stdout.write(
    `runplane: listening on ${await app.getUrl()} ` +
      `(${env.DATABASE_URL ? 'PostgreSQL at DATABASE_URL' : `embedded PostgreSQL in ${env.RUNPLANE_DATA_DIR}`})\n`,
  );
  return app;
}

/**
 * SIGINT/SIGTERM: stop taking requests, finish the ones in flight, close the pool and the embedded database, exit 0.
 */
function closeOnSignals(app: NestExpressApplication): void {
  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return;
    closing = true;
    process.stdout.write(`runplane: ${signal} received, shutting down\n`);
    app.close().then(
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
