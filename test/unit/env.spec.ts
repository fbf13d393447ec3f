import { ConfigError, parseEnv } from '../../src/config/env';

describe('configuration', () => {
  it('applies defaults when nothing is set', () => {
    const env = parseEnv({});
    expect(env).toMatchObject({
      PORT: 3000,
      RUNPLANE_DATA_DIR: './.runplane/data',
      LOG_LEVEL: 'info',
      DATABASE_POOL_SIZE: 10,
      DATABASE_POOL_IDLE_SECONDS: 60,
      RUNPLANE_BACKGROUND_LOOPS: true,
    });
    expect(env.DATABASE_URL).toBeUndefined();
  });

  it('has generous limits by default, the queued-job limit off', () => {
    expect(parseEnv({})).toMatchObject({
      RUNPLANE_RATE_LIMIT_WINDOW_SECONDS: 60,
      RUNPLANE_RATE_LIMIT_USER_REQUESTS: 30_000,
      RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS: 600_000,
      RUNPLANE_MAX_TOKENS_PER_USER: 100,
      RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT: 0,
    });
  });

  it('keeps events a week by default', () => {
    expect(parseEnv({}).RUNPLANE_EVENTS_RETENTION_HOURS).toBe(168);
    expect(parseEnv({ RUNPLANE_EVENTS_RETENTION_HOURS: '24' }).RUNPLANE_EVENTS_RETENTION_HOURS).toBe(24);
  });

  it('parses typed values', () => {
    const env = parseEnv({
      PORT: '8080',
      LOG_LEVEL: 'debug',
      RUNPLANE_BACKGROUND_LOOPS: 'false',
      DATABASE_URL: 'postgres://u@h:5432/db',
    });
    expect(env).toMatchObject({
      PORT: 8080,
      LOG_LEVEL: 'debug',
      RUNPLANE_BACKGROUND_LOOPS: false,
      DATABASE_URL: 'postgres://u@h:5432/db',
    });
  });

  it.each([
    [{ PORT: 'abc' }, /^Invalid configuration: PORT="abc" /],
    [{ PORT: '70000' }, /^Invalid configuration: PORT=70000 must not be greater than 65535$/],
    [{ LOG_LEVEL: 'loud' }, /^Invalid configuration: LOG_LEVEL="loud" must be one of/],
    [{ DATABASE_URL: 'mysql://x' }, /^Invalid configuration: DATABASE_URL=\(hidden\) must be a postgres/],
    [{ RUNPLANE_ADMIN_TOKEN: 'short' }, /^Invalid configuration: RUNPLANE_ADMIN_TOKEN=\(hidden\) must be 24-256/],
    [
      { DATABASE_POOL_IDLE_SECONDS: '0' },
      /^Invalid configuration: DATABASE_POOL_IDLE_SECONDS=0 must not be less than 1$/,
    ],
    [
      { RUNPLANE_BACKGROUND_LOOPS: 'maybe' },
      /^Invalid configuration: RUNPLANE_BACKGROUND_LOOPS="maybe" must be true or false$/,
    ],
    [
      { RUNPLANE_MAX_TOKENS_PER_USER: '0' },
      /^Invalid configuration: RUNPLANE_MAX_TOKENS_PER_USER=0 must not be less than 1$/,
    ],
    [
      { RUNPLANE_RATE_LIMIT_USER_REQUESTS: '-1' },
      /^Invalid configuration: RUNPLANE_RATE_LIMIT_USER_REQUESTS=-1 must not be less than 0$/,
    ],
    [
      { RUNPLANE_EVENTS_RETENTION_HOURS: '0' },
      /^Invalid configuration: RUNPLANE_EVENTS_RETENTION_HOURS=0 must not be less than 1$/,
    ],
    [
      { RUNPLANE_EVENTS_RETENTION_HOURS: 'week' },
      /^Invalid configuration: RUNPLANE_EVENTS_RETENTION_HOURS="week" must be an integer number of hours$/,
    ],
    [
      { RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT: 'lots' },
      /^Invalid configuration: RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT="lots" must be an integer$/,
    ],
  ])('refuses %j with one line naming the variable', (raw, message) => {
    expect(() => parseEnv(raw)).toThrow(ConfigError);
    expect(() => parseEnv(raw)).toThrow(message);
  });
});
