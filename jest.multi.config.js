// Jest: the multi-instance tier (test/multi): several app processes, PgBouncer, a streaming standby, database
// restarts. These start real servers of their own, so they run one file at a time, in a CI stage of their own.
const base = require('./jest.config.js');

module.exports = async () => {
  const config = await base();
  return {
    ...config,
    testMatch: ['<rootDir>/test/multi/**/*.spec.ts'],
    testPathIgnorePatterns: [],
    maxWorkers: 1,
    testTimeout: 180_000,
    slowTestThreshold: 60,
  };
};
