import { plainToInstance, Transform } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  MinLength,
  validateSync,
} from 'class-validator';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const toInt = ({ value }: { value: unknown }) =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
const toBool = ({ value }: { value: unknown }) => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  return value;
};

/** Every environment variable runplane reads, validated once at boot. */
export class Env {
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/\S+$/, { message: 'must be a postgres:// or postgresql:// URL' })
  DATABASE_URL?: string;

  @Transform(toInt)
  @IsInt({ message: 'must be an integer port' })
  @Min(0)
  @Max(65535)
  PORT: number = 3000;

  @Matches(/^[A-Za-z0-9.:\-[\]]{1,255}$/, { message: 'must be a host name or IP address' })
  HOST: string = '127.0.0.1';

  @IsString()
  @MinLength(1)
  RUNPLANE_DATA_DIR: string = './.runplane/data';

  @IsIn(LOG_LEVELS, { message: `must be one of ${LOG_LEVELS.join(', ')}` })
  LOG_LEVEL: LogLevel = 'info';

  /** auto: readable lines on a terminal, JSON lines otherwise; json or pretty force one. */
  @IsIn(LOG_FORMATS, { message: `must be one of ${LOG_FORMATS.join(', ')}` })
  LOG_FORMAT: LogFormat = 'auto';

  @IsOptional()
  @Matches(/^[A-Za-z0-9_\-.]{24,256}$/, { message: 'must be 24-256 characters of [A-Za-z0-9_-.]' })
  RUNPLANE_ADMIN_TOKEN?: string;

  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(1)
  @Max(200)
  DATABASE_POOL_SIZE: number = 10;

  /**
   * How long an unused pool connection stays open. A new connection starts with cold caches and none of the
   * prepared statements: with pg's default of 10 s, a runs page asked for after a 12 s lull took 290 ms against 160.
   */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(1)
  @Max(86400)
  DATABASE_POOL_IDLE_SECONDS: number = 60;

  /**
   * DATABASE_URL serves an embedded PostgreSQL (PGlite over a socket, as the test suite's): one session shared by
   * every connection, so one connection and no named prepared statements, as for the built-in embedded database.
   */
  @Transform(toBool)
  @IsBoolean({ message: 'must be true or false' })
  DATABASE_EMBEDDED: boolean = false;

  /**
   * Named prepared statements on the hot path. Turn off behind a pooler in transaction mode that does not track them
   * (PgBouncer before 1.21, Debian 12's 1.18): a name prepared on one server connection is missing on the next.
   */
  @Transform(toBool)
  @IsBoolean({ message: 'must be true or false' })
  DATABASE_NAMED_STATEMENTS: boolean = true;

  /**
   * A session-capable URL (the primary itself, or a session-pooling PgBouncer) for what needs a session of its own:
   * LISTEN for event and log followers. Default: DATABASE_URL. Needed when DATABASE_URL is a transaction pooler.
   */
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/\S+$/, { message: 'must be a postgres:// or postgresql:// URL' })
  DATABASE_SESSION_URL?: string;

  /**
   * A hot standby for the heavy read-only pages (runs list, history, costs, billing reports). A read goes there only
   * when the standby has replayed everything the primary had written when the read began; else to the primary.
   */
  @IsOptional()
  @Matches(/^postgres(ql)?:\/\/\S+$/, { message: 'must be a postgres:// or postgresql:// URL' })
  DATABASE_READ_URL?: string;

  /** statement_timeout of app sessions; a statement past it is cancelled and answered 503; 0 = none. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of milliseconds' })
  @Min(0)
  @Max(86_400_000)
  DATABASE_STATEMENT_TIMEOUT_MS: number = 0;

  /** On SIGTERM: how long requests in flight may take to finish before the process exits anyway. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of seconds' })
  @Min(1)
  @Max(3600)
  RUNPLANE_SHUTDOWN_GRACE_SECONDS: number = 15;

  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of seconds' })
  @Min(5)
  @Max(86400)
  RUNPLANE_LEASE_SECONDS: number = 60;

  @Transform(toBool)
  @IsBoolean({ message: 'must be true or false' })
  RUNPLANE_BACKGROUND_LOOPS: boolean = true;

  /** Requests per principal per window, counted in memory per instance (several instances multiply it). */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of seconds' })
  @Min(1)
  @Max(3600)
  RUNPLANE_RATE_LIMIT_WINDOW_SECONDS: number = 60;

  /** Per window, for user and admin tokens; 0 = no limit. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(0)
  @Max(1_000_000_000)
  RUNPLANE_RATE_LIMIT_USER_REQUESTS: number = 30_000;

  /** Per window, for service (worker) tokens, which legitimately send thousands a second; 0 = no limit. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(0)
  @Max(1_000_000_000)
  RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS: number = 600_000;

  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(1)
  @Max(100_000)
  RUNPLANE_MAX_TOKENS_PER_USER: number = 100;

  /**
   * How long events are kept (hours). Retention never removes an event of a run that has not finished: the cut-off
   * is the earlier of now minus this and the oldest unfinished run's submission.
   */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of hours' })
  @Min(1)
  @Max(87_600)
  RUNPLANE_EVENTS_RETENTION_HOURS: number = 168;

  /** Unfinished jobs a project may hold; 0 = no limit. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer' })
  @Min(0)
  @Max(1_000_000_000)
  RUNPLANE_MAX_QUEUED_JOBS_PER_PROJECT: number = 0;

  /**
   * Log bytes a submission may store, both streams together (a chunk past it is refused whole: 413
   * LOG_QUOTA_EXCEEDED). At most 2^31 - 1, so byte offsets stay within the cursors' integers.
   */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of bytes' })
  @Min(1)
  @Max(2_147_483_647)
  RUNPLANE_LOG_QUOTA_BYTES: number = 16 * 1024 * 1024;

  /** How long after a submission finished its worker may still send its last log chunks. */
  @Transform(toInt)
  @IsInt({ message: 'must be an integer number of seconds' })
  @Min(0)
  @Max(86400)
  RUNPLANE_LOG_GRACE_SECONDS: number = 60;

  /**
   * Log chunks are committed without waiting for their WAL flush (`synchronous_commit = off` for that transaction):
   * a PostgreSQL crash may lose the last fraction of a second of chunks (atomically: lengths with bytes, so the
   * stream stays whole and the worker carries on from the length the server has), never other data; a submission's
   * final report, committed synchronously, makes every chunk before it durable. `false`: each chunk waits its flush.
   */
  @Transform(toBool)
  @IsBoolean({ message: 'must be true or false' })
  RUNPLANE_LOG_ASYNC_COMMIT: boolean = true;

  /** `serve` also runs one worker (this machine's capacity) that executes jobs as local processes. */
  @Transform(toBool)
  @IsBoolean({ message: 'must be true or false' })
  RUNPLANE_EMBEDDED_WORKER: boolean = true;

  /** The embedded worker's work directory; default: `worker` beside the data directory. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  RUNPLANE_WORKER_DIR?: string;
}

export class ConfigError extends Error {}

/** Parses and validates an environment; throws ConfigError with one line naming the first bad variable. */
export function parseEnv(raw: NodeJS.ProcessEnv): Env {
  const cleaned: Record<string, string> = {};
  for (const key of Object.keys(new Env())) {
    const v = raw[key];
    if (v !== undefined && v !== '') cleaned[key] = v;
  }
  const optional = [
    'DATABASE_URL',
    'DATABASE_SESSION_URL',
    'DATABASE_READ_URL',
    'RUNPLANE_ADMIN_TOKEN',
    'RUNPLANE_WORKER_DIR',
  ];
  for (const key of optional) {
    const v = raw[key];
    if (v !== undefined && v !== '') cleaned[key] = v;
  }
  const env = plainToInstance(Env, cleaned, { exposeDefaultValues: true });
  const errors = validateSync(env, { forbidUnknownValues: false });
  if (errors.length > 0) {
    const e = errors[0];
    const shown = e.property.endsWith('_TOKEN') || e.property.endsWith('_URL') ? '(hidden)' : JSON.stringify(e.value);
    // A type error says more than a range error about the same value.
    const constraints = e.constraints ?? {};
    const key =
      ['isInt', 'isBoolean', 'isIn', 'matches', 'isString'].find((k) => k in constraints) ??
      Object.keys(constraints)[0];
    const message = (key && constraints[key]) || 'is invalid';
    const why = message.startsWith(`${e.property} `) ? message.slice(e.property.length + 1) : message;
    throw new ConfigError(`Invalid configuration: ${e.property}=${shown} ${why}`);
  }
  return env;
}
