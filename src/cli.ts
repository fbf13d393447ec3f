import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { DataSource } from 'typeorm';
import { AppModule } from './app.module';
import { parseEnv } from './config/env';
import { dataSourceOptions } from './infra/database/data-source-options';
import { EmbeddedPostgres } from './infra/database/embedded-postgres';
import { runMigrationsLocked } from './infra/database/migrations-runner';
import { validateSync } from 'class-validator';
import { BillingService } from './modules/billing/billing.service';
import { NewRateDto } from './modules/billing/dto/billing.dto';
import { UsersService } from './modules/users/users.service';
import { serve } from './serve';
import { exitOnStartupFailure } from './startup-failure';
import { required } from './common/required';

const USAGE = `usage: runplane <command>
  serve                 start the HTTP server (the default)
  migrate               apply pending migrations and exit
  create-admin [NAME]   create a global admin and print its token (NAME defaults to admin-<random>)
  set-rate NAME USD_PER_UNIT_HOUR [UNIT]
                        add a new version of a billed resource's rate (NAME one a requestable resource key maps
                        to, e.g. cpu, memory, gpu, disk; UNIT, if given, must be the one it is billed in)`;

async function migrate(): Promise<void> {
  const env = parseEnv(process.env);
  const embedded = env.DATABASE_URL ? undefined : await EmbeddedPostgres.start({ dataDir: env.RUNPLANE_DATA_DIR });
  const ds = new DataSource(
    dataSourceOptions({
      url: env.DATABASE_URL ?? required(embedded, 'the embedded database').url,
      poolSize: 1,
      embedded: !!embedded,
    }),
  );
  try {
    await ds.initialize();
    const applied = await runMigrationsLocked(ds);
    process.stdout.write(
      applied.length ? `applied: ${applied.map((m) => m.name).join(', ')}\n` : 'schema is up to date\n',
    );
  } finally {
    if (ds.isInitialized) await ds.destroy();
    await embedded?.stop();
  }
}

async function createAdmin(name: string | undefined): Promise<void> {
  parseEnv(process.env);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  try {
    const created = await app
      .get(UsersService)
      .createUser(name ?? `admin-${Math.random().toString(36).slice(2, 8)}`, 'admin');
    process.stdout.write(`created admin ${created.user.name}\ntoken: ${created.token}\n`);
  } finally {
    await app.close();
  }
}

async function setRate(args: string[]): Promise<void> {
  const [name, rate, unit] = args;
  if (!name || rate === undefined || Number.isNaN(Number(rate))) {
    process.stderr.write(`${USAGE}\n`);
    process.exit(2);
  }
  parseEnv(process.env);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false, abortOnError: false });
  try {
    const body = Object.assign(new NewRateDto(), {
      name,
      rate_usd_per_unit_hour: Number(rate),
      ...(unit ? { unit } : {}),
    });
    const errors = validateSync(body);
    if (errors.length > 0)
      throw new Error(`invalid rate: ${errors.flatMap((e) => Object.values(e.constraints ?? {})).join('; ')}`);
    const c = await app.get(BillingService).addRateVersion(body);
    process.stdout.write(
      `${c.name} v${c.version}: ${c.rate_usd_per_unit_hour} USD per ${c.unit} from ${c.valid_from}\n`,
    );
  } finally {
    await app.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', ...rest] = argv;
  switch (command) {
    case 'serve':
      await serve();
      return;
    case 'migrate':
      return migrate();
    case 'create-admin':
      return createAdmin(rest[0]);
    case 'set-rate':
      return setRate(rest);
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
main(argv).catch((err: unknown) =>
  exitOnStartupFailure(err, (argv[0] ?? 'serve') === 'serve' ? 'could not start' : `${argv[0]} failed`),
);
