import type { INestApplication } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import type TestAgent from 'supertest/lib/agent';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { configureApp } from '../../src/configure-app';
import { createHttpAdapter } from '../../src/common/http/http-adapter';
import type { GlobalRole } from '../../src/common/auth/principal';
import { UsersService } from '../../src/modules/users/users.service';
import { appDatabaseEnv, OwnDatabase, workerDatabaseUrl } from './test-databases';

export const embeddedOnly = process.env.RUNPLANE_TEST_EMBEDDED === '1';
/** For tests that need real concurrency (SKIP LOCKED, advisory locks, parallel transactions). */
export const describeRealPostgres = embeddedOnly ? describe.skip : describe;

export interface TestApp {
  app: INestApplication;
  http: TestAgent;
  dataSource: DataSource;
  /** A fresh user (or admin, or service account) with a token. */
  user(role?: GlobalRole): Promise<TestUser>;
  close(): Promise<void>;
}

export interface TestUser {
  id: string;
  name: string;
  token: string;
  auth: { Authorization: string };
}

export const uniqueName = (prefix: string) => `${prefix}-${randomBytes(5).toString('hex')}`;

/** The real AppModule over this worker's database, configured exactly as `serve` does it. */
export async function createTestApp(
  env: Record<string, string> = {},
  options: { ownDatabase?: OwnDatabase } = {},
): Promise<TestApp> {
  delete process.env.DATABASE_NAMED_STATEMENTS;
  delete process.env.DATABASE_SESSION_URL;
  Object.assign(process.env, appDatabaseEnv(await workerDatabaseUrl(options.ownDatabase)));
  process.env.LOG_LEVEL = 'silent';
  process.env.RUNPLANE_BACKGROUND_LOOPS = 'false';
  // The embedded database is one session for every client: the app treats it as it treats its own embedded one.
  process.env.DATABASE_EMBEDDED = embeddedOnly ? 'true' : 'false';
  Object.assign(process.env, env);
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication<NestFastifyApplication>(createHttpAdapter(), {
    logger: false,
    bodyParser: false,
  });
  configureApp(app);
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  const users = app.get(UsersService);
  return {
    app,
    http: request(app.getHttpServer()),
    dataSource: app.get(DataSource),
    async user(role: GlobalRole = 'user') {
      const created = await users.createUser(uniqueName(role), role);
      return {
        id: created.user.id,
        name: created.user.name,
        token: created.token,
        auth: { Authorization: `Bearer ${created.token}` },
      };
    },
    close: () => app.close(),
  };
}
