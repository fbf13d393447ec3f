import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError, EXIT } from './errors';

/** What `login` stores: the server, a token and a default project. */
export interface StoredConfig {
  url?: string;
  token?: string;
  project?: string;
}

/** The config file: RUNPLANE_CONFIG, else $XDG_CONFIG_HOME/runplane/config.json, else ~/.config/runplane/…. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.RUNPLANE_CONFIG) return env.RUNPLANE_CONFIG;
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  return join(base, 'runplane', 'config.json');
}

export function readConfig(path = configPath()): StoredConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new CliError(`cannot read ${path}: ${(err as Error).message}`, EXIT.USAGE);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    const o = parsed as Record<string, unknown>;
    const str = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
    return { url: str('url'), token: str('token'), project: str('project') };
  } catch {
    throw new CliError(`${path} is not a runplane config file (JSON): fix it or run runplane login again`, EXIT.USAGE);
  }
}

/**
 * Writes the config with mode 0600 (its directory 0700): a temporary file created with that mode, then renamed, so
 * the token is never readable by others, not even for a moment; an existing file's looser mode is not kept.
 */
export function writeConfig(config: StoredConfig, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

/** Where each setting came from: the environment wins over the file (for scripts and CI). */
export interface Credentials {
  url: string;
  token: string;
  project?: string;
}

export function resolveCredentials(env: NodeJS.ProcessEnv = process.env): Partial<Credentials> {
  const file = readConfig(configPath(env));
  return {
    url: env.RUNPLANE_URL || file.url,
    token: env.RUNPLANE_TOKEN || file.token,
    project: env.RUNPLANE_PROJECT || file.project,
  };
}
