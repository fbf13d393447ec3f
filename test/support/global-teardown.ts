import type { PgBouncer } from './cluster';
import type { EmbeddedPostgres } from '../../src/infra/database/embedded-postgres';
import { dropStaleDatabases, withAdminClient } from './test-databases';
import { required } from '../../src/common/required';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __pgbouncer?: PgBouncer }).__pgbouncer?.stop();
  const embedded = (globalThis as { __embedded?: EmbeddedPostgres[] }).__embedded;
  if (embedded) {
    for (const e of embedded) await e.stop();
    return;
  }
  await withAdminClient(
    required(process.env.RUNPLANE_TEST_ADMIN_URL, 'RUNPLANE_TEST_ADMIN_URL (set by jest.config.js)'),
    dropStaleDatabases,
  );
}
