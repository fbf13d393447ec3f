import { ConfigError, parseEnv } from '../../src/config/env';

describe('configuration', () => {
  it('applies defaults when nothing is set', () => {
    const env = parseEnv({});
    expect(env).toMatchObject({ PORT: 3000, RUNPLANE_DATA_DIR: './.runplane/data', LOG_LEVEL: 'info', DATABASE_POOL_SIZE: 10, DATABASE_POOL_IDLE_SECONDS: 60, RUNPLANE_BACKGROUND_LOOPS: true });
    expect(env.DATABASE_URL).toBeUndefined();
  });

  it('parses typed values', () => {
    const env = parseEnv({ PORT: '8080', LOG_LEVEL: 'debug', RUNPLANE_BACKGROUND_LOOPS: 'false', DATABASE_URL: 'postgres://u@h:5432/db' });
    expect(env).toMatchObject({ PORT: 8080, LOG_LEVEL: 'debug', RUNPLANE_BACKGROUND_LOOPS: false, DATABASE_URL: 'postgres://u@h:5432/db' });
  });

  it.each([
    [{ PORT: 'abc' }, /^Invalid configuration: PORT="abc" /],
    [{ PORT: '70000' }, /^Invalid configuration: PORT=70000 must not be greater than 65535$/],
    [{ LOG_LEVEL: 'loud' }, /^Invalid configuration: LOG_LEVEL="loud" must be one of/],
    [{ DATABASE_URL: 'mysql://x' }, /^Invalid configuration: DATABASE_URL=\(hidden\) must be a postgres/],
    [{ RUNPLANE_ADMIN_TOKEN: 'short' }, /^Invalid configuration: RUNPLANE_ADMIN_TOKEN=\(hidden\) must be 24-256/],
    [{ DATABASE_POOL_IDLE_SECONDS: '0' }, /^Invalid configuration: DATABASE_POOL_IDLE_SECONDS=0 must not be less than 1$/],
    [{ RUNPLANE_BACKGROUND_LOOPS: 'maybe' }, /^Invalid configuration: RUNPLANE_BACKGROUND_LOOPS="maybe" must be true or false$/],
  ])('refuses %j with one line naming the variable', (raw, message) => {
    expect(() => parseEnv(raw)).toThrow(ConfigError);
    expect(() => parseEnv(raw)).toThrow(message);
  });
});
