import { databaseFailure } from './common/errors/database-unavailable';
import { ConfigError } from './config/env';
import { DataDirLockedError } from './infra/database/embedded-postgres';

/**
 * The one line a failed start prints (`runplane: <what is wrong; what to do>`), for the failures a user can cause:
 * bad configuration, a data directory in use or not writable, a port in use, a database that cannot be reached.
 * Anything else is still one line (its message's first line); the stack is for LOG_LEVEL=debug.
 */
/**
 * Prints the one line (and, at LOG_LEVEL debug or trace, the stack) and exits 1. `failed` prefixes a failure of
 * no known kind: 'could not start' for the server, '<command> failed' for the CLI's other commands.
 */
export function exitOnStartupFailure(err: unknown, failed = 'could not start'): never {
  process.stderr.write(`${describeStartupFailure(err, process.env, failed)}\n`);
  if (['debug', 'trace'].includes(process.env.LOG_LEVEL ?? '') && err instanceof Error && err.stack)
    process.stderr.write(`${err.stack}\n`);
  process.exit(1);
}

export function describeStartupFailure(
  err: unknown,
  env: NodeJS.ProcessEnv = process.env,
  failed = 'could not start',
): string {
  return `runplane: ${reason(err, env, failed).replace(/\s*\n[\s\S]*$/, '')}`;
}

function reason(err: unknown, env: NodeJS.ProcessEnv, failed: string): string {
  if (err instanceof ConfigError) return `${err.message}; fix it and start again (the README lists every variable)`;
  if (err instanceof DataDirLockedError) {
    return `${err.message}: stop that server (or command), or set RUNPLANE_DATA_DIR to another directory`;
  }
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    code?: string;
    syscall?: string;
    address?: string;
    port?: number;
    path?: string;
    message?: string;
  };
  if (e.syscall === 'listen') {
    const where = `${e.address ?? env.HOST ?? '127.0.0.1'}:${e.port ?? env.PORT ?? 3000}`;
    if (e.code === 'EADDRINUSE')
      return (
        `cannot listen on ${where}: the port is already in use; ` +
        'stop what listens there, or set PORT to a free port (0 picks one)'
      );
    if (e.code === 'EACCES')
      return (
        `cannot listen on ${where}: permission denied (ports below 1024 need privileges); ` +
        'set PORT to 1024 or above'
      );
    if (e.code === 'EADDRNOTAVAIL')
      return (
        `cannot listen on ${where}: no such address on this machine; ` +
        'set HOST to one of its addresses (0.0.0.0 for all)'
      );
    return `cannot listen on ${where}: ${e.code ?? e.message}; check HOST and PORT`;
  }
  if ((e.code === 'EACCES' || e.code === 'EPERM' || e.code === 'EROFS' || e.code === 'ENOTDIR') && !env.DATABASE_URL) {
    return (
      `cannot use the data directory ${env.RUNPLANE_DATA_DIR ?? './.runplane/data'}: ` +
      `${e.code}${e.path ? ` on ${e.path}` : ''}; set RUNPLANE_DATA_DIR to a directory this user can write`
    );
  }
  if (env.DATABASE_URL && databaseFailure(err)) {
    return (
      `cannot connect to the PostgreSQL server at DATABASE_URL (${describeUrl(env.DATABASE_URL)}): ` +
      `${firstLine(err)}; check that the server runs and accepts this user and database`
    );
  }
  return `${failed}: ${firstLine(err)}`;
}

function firstLine(err: unknown): string {
  const e = (typeof err === 'object' && err !== null ? err : {}) as {
    message?: unknown;
    code?: unknown;
    errors?: unknown;
  };
  // Node reports every address of a host name together, in an AggregateError with an empty message.
  if (!e.message && Array.isArray(e.errors) && e.errors.length > 0) return firstLine(e.errors[0]);
  const message =
    typeof e.message === 'string' && e.message.trim() ? e.message : typeof e.code === 'string' ? e.code : String(err);
  return message.split('\n')[0];
}

/** host:port/database, never the password. */
function describeUrl(raw: string): string {
  try {
    const url = new URL(raw);
    return `${url.hostname}:${url.port || 5432}${url.pathname}`;
  } catch {
    return 'an unparsable URL';
  }
}
