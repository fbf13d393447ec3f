import { createRunplaneClient, type RunplaneClient, type Schemas } from '../../src/client';

export type { Schemas };
export type Run = Schemas['RunView'];
export type Job = Schemas['JobView'];
export type Submission = Schemas['SubmissionView'];
export type Group = Schemas['JobGroupWithCost'];
export type Cancellation = Schemas['CancellationView'];

const TOKEN_KEY = 'runplane.token';

/** The signed-in token lives in localStorage: it survives reloads and new tabs, and sign-out removes it. */
export const auth = {
  get token(): string | null {
    return localStorage.getItem(TOKEN_KEY);
  },
  signIn(token: string): void {
    localStorage.setItem(TOKEN_KEY, token);
    cached = undefined;
  },
  signOut(): void {
    localStorage.removeItem(TOKEN_KEY);
    cached = undefined;
  },
};

let cached: { token: string; client: RunplaneClient } | undefined;

/** The typed client (generated from openapi.json) for the current token, against the server that served the page. */
export function api(token = auth.token ?? ''): RunplaneClient {
  if (cached?.token !== token) cached = { token, client: createRunplaneClient(location.origin, token) };
  return cached.client;
}

/** A refused request, as the API described it ({status_code, code, message}). */
export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The data of an openapi-fetch answer, or its error as an ApiFailure (a 401 also signs the browser out). */
export async function call<T>(
  request: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<NonNullable<T>> {
  let answer: { data?: T; error?: unknown; response: Response };
  try {
    answer = await request;
  } catch (e) {
    throw new ApiFailure(0, 'NETWORK', `The server could not be reached (${(e as Error).message})`);
  }
  const { data, error, response } = answer;
  if (response.ok && data !== undefined && data !== null) return data as NonNullable<T>;
  const body = (error ?? {}) as { code?: string; message?: string };
  if (response.status === 401) window.dispatchEvent(new CustomEvent('runplane:unauthenticated'));
  throw new ApiFailure(response.status, body.code ?? 'HTTP_' + response.status, body.message ?? response.statusText);
}

export const money = (usd: number | null | undefined) =>
  usd === null || usd === undefined ? '–' : usd < 0.01 && usd > 0 ? `$${usd.toPrecision(2)}` : `$${usd.toFixed(2)}`;
