import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { validateSync } from 'class-validator';
import { DataSource } from 'typeorm';
import { AppModule } from './app.module';
import { parseEnv } from './config/env';
import { dataSourceOptions } from './infra/database/data-source-options';
import { EmbeddedPostgres } from './infra/database/embedded-postgres';
import { runMigrationsLocked } from './infra/database/migrations-runner';
import { BillingService } from './modules/billing/billing.service';
import { NewRateDto } from './modules/billing/dto/billing.dto';
import { UsersService } from './modules/users/users.service';

/** The CLI's commands that work on the server's database (loaded only by them: `runplane worker` never loads Nest). */

export async function migrate(): Promise<void> {
  const env = parseEnv(process.env);
  const embedded = env.DATABASE_URL ? undefined : await EmbeddedPostgres.start({ dataDir: env.RUNPLANE_DATA_DIR });
  const url = env.DATABASE_URL ?? embedded?.url;
  if (!url) throw new Error('no database: DATABASE_URL is unset and the embedded one did not start');
  const ds = new DataSource(dataSourceOptions({ url, poolSize: 1, embedded: !!embedded }));
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

export async function createAdmin(name: string | undefined): Promise<void> {
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

/** Returns false when the arguments are not a rate (the caller prints the usage). */
export async function setRate(args: string[]): Promise<boolean> {
  const [name, rate, unit] = args;
  if (!name || rate === undefined || Number.isNaN(Number(rate))) return false;
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
    const created = await app.get(BillingService).addRateVersion(body);
    process.stdout.write(
      `${created.name} v${created.version}: ${created.rate_usd_per_unit_hour} USD per ${created.unit} ` +
        `from ${created.valid_from}\n`,
    );
  } finally {
    await app.close();
  }
  return true;
}
