import { DatabaseError } from 'pg';
import { ConfigError } from '../../src/config/env';
import { DataDirLockedError } from '../../src/infra/database/embedded-postgres';
import { describeStartupFailure } from '../../src/startup-failure';

const listenError = (code: string) =>
  Object.assign(new Error(`listen ${code}`), { code, syscall: 'listen', address: '0.0.0.0', port: 80 });
const withUrl = { DATABASE_URL: 'postgres://app:s3cret@db.example:6543/runplane' };

describe('the one line a failed start prints', () => {
  it.each([
    [
      new ConfigError('Invalid configuration: PORT="x" must be an integer port'),
      {},
      /^runplane: Invalid configuration: PORT="x" must be an integer port; fix it/,
    ],
    [
      new DataDirLockedError('Data directory /d is in use by process 42 (lock file /d.lock)'),
      {},
      /^runplane: Data directory \/d is in use by process 42 .*set RUNPLANE_DATA_DIR/,
    ],
    [
      listenError('EADDRINUSE'),
      {},
      /^runplane: cannot listen on 0\.0\.0\.0:80: the port is already in use; .*set PORT/,
    ],
    [
      listenError('EACCES'),
      {},
      /^runplane: cannot listen on 0\.0\.0\.0:80: permission denied .*set PORT to 1024 or above$/,
    ],
    [
      listenError('EADDRNOTAVAIL'),
      {},
      /^runplane: cannot listen on 0\.0\.0\.0:80: no such address on this machine; set HOST/,
    ],
    [
      Object.assign(new Error('EACCES: permission denied, mkdir /root/x'), { code: 'EACCES', path: '/root/x' }),
      { RUNPLANE_DATA_DIR: '/root/x' },
      /^runplane: cannot use the data directory \/root\/x: EACCES on \/root\/x; set RUNPLANE_DATA_DIR/,
    ],
    [
      Object.assign(new DatabaseError('database "runplane" does not exist', 0, 'error'), { code: '3D000' }),
      withUrl,
      /^runplane: cannot connect to the PostgreSQL server at DATABASE_URL \(db\.example:6543\/runplane\): database "runplane" does not exist; check/,
    ],
    [
      new AggregateError([Object.assign(new Error('connect ECONNREFUSED ::1:6543'), { code: 'ECONNREFUSED' })], ''),
      withUrl,
      /^runplane: cannot connect .*: connect ECONNREFUSED ::1:6543; check/,
    ],
    [
      new Error('relation "x" does not exist\n    at somewhere'),
      {},
      /^runplane: could not start: relation "x" does not exist$/,
    ],
  ])('%s', (err, env, line) => {
    const printed = describeStartupFailure(err, env as NodeJS.ProcessEnv);
    expect(printed).toMatch(line);
    expect(printed).not.toContain('\n');
    expect(printed).not.toContain('s3cret');
  });

  it('names the CLI command that failed when the failure is of no known kind', () => {
    expect(describeStartupFailure(new Error('invalid rate: must be positive'), {}, 'set-rate failed')).toBe(
      'runplane: set-rate failed: invalid rate: must be positive',
    );
  });
});
