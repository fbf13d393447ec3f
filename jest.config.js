// Jest: unit, repository and e2e tiers, all against real PostgreSQL (or the embedded one when none answers).
const { Client } = require('pg');

const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
      target: 'es2022',
      keepClassNames: true,
    },
    module: { type: 'commonjs' },
    sourceMaps: 'inline',
  },
];

async function serverReachable(url) {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

module.exports = async () => {
  const adminUrl =
    process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
  const embedded = process.env.RUNPLANE_TEST_EMBEDDED === '1' || !(await serverReachable(adminUrl));
  process.env.RUNPLANE_TEST_EMBEDDED = embedded ? '1' : '0';
  process.env.RUNPLANE_TEST_ADMIN_URL = adminUrl;
  return {
    rootDir: __dirname,
    testEnvironment: 'node',
    transform: { '^.+\\.ts$': swc },
    moduleFileExtensions: ['ts', 'js', 'json'],
    testMatch: ['<rootDir>/test/**/*.spec.ts'],
    // The multi-instance tier runs in a stage of its own (jest.multi.config.js, .ci/multi).
    testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/multi/'],
    globalSetup: '<rootDir>/test/support/global-setup.ts',
    globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    // The embedded database is one serialised session: one worker. A real server: one database per worker.
    maxWorkers: embedded ? 1 : 2,
    testTimeout: 60_000,
    slowTestThreshold: 20,
  };
};
