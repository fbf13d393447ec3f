import { createRunplaneClient, type RunplaneClient, type Schemas } from '../client';
import { resolveCredentials } from './config';
import { CliError, EXIT, rememberSecret, usageError } from './errors';

/** A connection to the server: the typed client, and what the commands need to know about it. */
export interface Session {
  api: RunplaneClient;
  url: string;
  /** The --project option, else RUNPLANE_PROJECT, else the config's default; undefined when none. */
  defaultProject?: string;
  /** The project, or a usage error saying how to give one. */
  project(): string;
}

/** Opens a session from the environment and the config file; `projectOption` (--project) wins over both. */
export function openSession(projectOption?: string, env: NodeJS.ProcessEnv = process.env): Session {
  const c = resolveCredentials(env);
  if (!c.url) throw usageError('no server: run runplane login --url URL --token TOKEN, or set RUNPLANE_URL');
  if (!c.token) throw usageError('no token: run runplane login --url URL --token TOKEN, or set RUNPLANE_TOKEN');
  const token = c.token;
  const defaultProject = projectOption ?? c.project;
  rememberSecret(token);
  return {
    api: createRunplaneClient(c.url, token),
    url: c.url.replace(/\/+$/, ''),
    defaultProject,
    project: () => {
      if (!defaultProject)
        throw usageError('no project: pass --project NAME, set RUNPLANE_PROJECT, or runplane login --project NAME');
      return defaultProject;
    },
  };
}

type ApiResult<D> = { data?: D; error?: unknown; response: Response };

/** The data of a successful answer; a refusal or an unreachable server becomes a CliError with one clear line. */
export async function unwrap<D>(request: Promise<ApiResult<D>>, url: string): Promise<D> {
  let result: ApiResult<D>;
  try {
    result = await request;
  } catch (err) {
    throw unreachable(err, url);
  }
  if (result.response.ok && result.error === undefined) return result.data as D;
  throw refused(result.response, result.error);
}

export function unreachable(err: unknown, url: string): CliError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause;
  const why =
    cause?.code === 'ECONNREFUSED'
      ? 'connection refused'
      : cause?.code === 'ENOTFOUND'
        ? 'unknown host'
        : (cause?.message ?? (err as Error).message);
  return new CliError(
    `cannot reach the server at ${url} (${why}): is it running? (runplane login --url, or RUNPLANE_URL, sets where)`,
    EXIT.UNAVAILABLE,
  );
}

/** The server's own message and code; a bad token gets a hint (never the token). */
export function refused(response: Response, body: unknown): CliError {
  const e = (typeof body === 'object' && body !== null ? body : {}) as Partial<Schemas['Error400']>;
  const message = typeof e.message === 'string' ? e.message : response.statusText || 'no message';
  const code = typeof e.code === 'string' ? e.code : `HTTP ${response.status}`;
  let text = `${message} (${code})`;
  if (response.status === 401) text += ': run runplane login with a valid token, or set RUNPLANE_TOKEN';
  return new CliError(text, response.status >= 500 ? EXIT.UNAVAILABLE : EXIT.REFUSED);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type RunView = Schemas['RunView'];

/**
 * Which submissions of a run view carry their documents (provisioning_data, runtime_data): `newest` for output a
 * script may read (`--json`), `none` where only statuses, exit codes and costs are shown (tables, polling).
 */
type Documents = 'newest' | 'none';

/** A run by id or by name (names are unique in a project: the newest runs are searched first). */
export async function findRun(
  s: Session,
  project: string,
  ref: string,
  jobsLimit = 1000,
  documents: Documents = 'newest',
): Promise<RunView> {
  if (UUID.test(ref)) return getRun(s, project, ref, jobsLimit, documents);
  let cursor: string | undefined;
  do {
    const page = await unwrap(
      s.api.GET('/api/v1/projects/{project}/runs', {
        params: { path: { project }, query: { limit: 100, include_jobs: false, ...(cursor ? { cursor } : {}) } },
      }),
      s.url,
    );
    const found = page.items.find((r) => r.run_name === ref);
    if (found) return jobsLimit === 0 ? found : getRun(s, project, found.id, jobsLimit, documents);
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  throw new CliError(`no run named ${ref} in project ${project} (RUN_NOT_FOUND)`, EXIT.REFUSED);
}

/** A run with its first `jobsLimit` jobs, each with its newest submission. */
export function getRun(
  s: Session,
  project: string,
  runId: string,
  jobsLimit = 1000,
  documents: Documents = 'newest',
): Promise<RunView> {
  const query = { jobs_limit: jobsLimit, job_submissions_limit: 1, submission_data: documents };
  return unwrap(
    s.api.GET('/api/v1/projects/{project}/runs/{runId}', { params: { path: { project, runId }, query } }),
    s.url,
  );
}

export const FINISHED_RUN = new Set(['done', 'failed', 'terminated']);
