/** Exit codes of the client commands (the README lists them). */
export const EXIT = {
  OK: 0,
  /** `apply` (following) or `wait`: the run ended, but not `done` (failed, terminated, aborted). */
  RUN_NOT_DONE: 1,
  /** Bad usage: an unknown command or option, a missing argument, no credentials. */
  USAGE: 2,
  /** The run file is invalid (every error listed with its line and column); nothing was sent. */
  INVALID_FILE: 3,
  /** The server refused the request (4xx: not found, forbidden, conflict, invalid, bad token). */
  REFUSED: 4,
  /** The server could not be reached, or failed (5xx). */
  UNAVAILABLE: 5,
  /** Interrupted (Ctrl-C); a run being followed keeps running. */
  INTERRUPTED: 130,
} as const;

/** A failure the CLI reports as one message (no stack) and an exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.USAGE);

/** Tokens this process knows: whatever is printed passes through `redact`, so none of them can leak into output. */
const secrets = new Set<string>();
export function rememberSecret(s: string): void {
  if (s) secrets.add(s);
}
export function redact(text: string): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join('<token>');
  return out;
}
