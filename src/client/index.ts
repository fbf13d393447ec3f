import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './api-types';

/**
 * The typed runplane client, for the CLI, the console and the tests: openapi-fetch over the types generated from
 * openapi.json (`npm run openapi`). Imports nothing of the server, so a CLI that uses it starts fast.
 */
export type { components, operations, paths };
export type Schemas = components['schemas'];
export type RunplaneClient = Client<paths>;

/** A client of the server at `url` (e.g. http://127.0.0.1:3000) with a bearer token (none for public routes). */
export function createRunplaneClient(
  url: string,
  token?: string,
  options: Omit<ClientOptions, 'baseUrl'> = {},
): RunplaneClient {
  const headers = {
    ...(options.headers as Record<string, string> | undefined),
    ...(token ? { Authorization: `Bearer ${token}` } : {}),
  };
  return createClient<paths>({ ...options, baseUrl: url.replace(/\/+$/, ''), headers });
}

/** The API's error body; each route's documented error responses narrow `status_code` and `code`. */
export interface ApiError {
  status_code: number;
  code: string;
  message: string;
  details: unknown[];
}
