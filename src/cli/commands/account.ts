import { chmodSync, writeFileSync } from 'node:fs';
import { createRunplaneClient, type Schemas } from '../../client';
import { openSession, unwrap, type Session } from '../api';
import { configPath, readConfig, writeConfig } from '../config';
import { EXIT, rememberSecret, usageError } from '../errors';
import { age, json, money, stdout, table } from '../format';
import { arg, str, type Context } from '../main';

/** login, projects, users, tokens: the account side. No secret is ever printed. */

/** The token piped on standard input, if any (a terminal is never read: the token would echo). */
async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return '';
  let text = '';
  for await (const chunk of process.stdin) text += chunk;
  return text.trim();
}

export async function login(ctx: Context): Promise<number> {
  const url = str(ctx.values, 'url') ?? process.env.RUNPLANE_URL ?? readConfig().url;
  if (!url) throw usageError('missing --url URL (the server, e.g. http://127.0.0.1:3000)');
  // --token, else standard input, else the one already stored (to change the URL or the project alone).
  const token =
    str(ctx.values, 'token') || (await readStdin()) || process.env.RUNPLANE_TOKEN || readConfig().token || '';
  if (!token)
    throw usageError('no token: pass --token TOKEN, or pipe it on standard input (runplane login --url URL < file)');
  rememberSecret(token);
  const api = createRunplaneClient(url, token);
  const me = await unwrap(api.GET('/api/v1/users/me'), url);
  const project = str(ctx.values, 'project');
  if (project) await unwrap(api.GET('/api/v1/projects/{project}', { params: { path: { project } } }), url);
  const path = configPath();
  writeConfig({ url, token, ...(project ? { project } : {}) }, path);
  if (ctx.json) stdout.write(json({ url, user: me, project: project ?? null, config: path }));
  else
    stdout.write(
      `logged in to ${url} as ${me.name} (${me.global_role})${project ? `, project ${project}` : ''}\n` +
        `saved in ${path} (mode 0600)\n`,
    );
  return EXIT.OK;
}

async function allPages<T>(page: (cursor?: string) => Promise<{ items: T[]; next_cursor: string | null }>) {
  const items: T[] = [];
  let cursor: string | undefined;
  do {
    const p = await page(cursor);
    items.push(...p.items);
    cursor = p.next_cursor ?? undefined;
  } while (cursor);
  return items;
}

const cursorQuery = (cursor?: string) => ({ limit: 100, ...(cursor ? { cursor } : {}) });

export async function projects(ctx: Context): Promise<number> {
  const s = openSession();
  const [sub] = ctx.positionals;
  if (sub === 'create') {
    const name = arg(ctx, 1, 'the project name');
    const limit = str(ctx.values, 'billing-limit');
    if (limit !== undefined && Number.isNaN(Number(limit))) throw usageError('--billing-limit must be a number (USD)');
    const created = await unwrap(
      s.api.POST('/api/v1/projects', {
        body: { name, ...(limit !== undefined ? { billing_limit_usd: Number(limit) } : {}) },
      }),
      s.url,
    );
    stdout.write(ctx.json ? json(created) : `created project ${created.name}\n`);
    return EXIT.OK;
  }
  if (sub === 'show') {
    const project = arg(ctx, 1, 'the project name');
    const p = await unwrap(s.api.GET('/api/v1/projects/{project}', { params: { path: { project } } }), s.url);
    if (ctx.json) stdout.write(json(p));
    else
      stdout.write(
        `project ${p.name}, billing limit ${limitText(p)}, created ${p.created_at}\n\n` +
          table(
            ['MEMBER', 'ROLE'],
            p.members.map((m) => [m.user, m.role]),
          ),
      );
    return EXIT.OK;
  }
  if (sub !== undefined) throw usageError(`unknown projects subcommand ${sub} (create, show)`);
  const list = await allPages((cursor) =>
    unwrap(s.api.GET('/api/v1/projects', { params: { query: cursorQuery(cursor) } }), s.url),
  );
  if (ctx.json) stdout.write(json(list));
  else
    stdout.write(
      table(
        ['PROJECT', 'MEMBERS', 'BILLING LIMIT', 'CREATED'],
        list.map((p) => [p.name, String(p.members.length), limitText(p), age(p.created_at)]),
      ),
    );
  return EXIT.OK;
}

const limitText = (p: Schemas['ProjectView']) => (p.billing_limit_usd === null ? 'none' : money(p.billing_limit_usd));

/** Writes a secret to a file only its owner can read; the path is what gets printed. */
function writeSecret(path: string, secret: string): void {
  writeFileSync(path, `${secret}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
}

export async function users(ctx: Context): Promise<number> {
  const s = openSession();
  const [sub] = ctx.positionals;
  if (sub === 'create') {
    const name = arg(ctx, 1, 'the user name');
    const file = str(ctx.values, 'token-file');
    if (!file) throw usageError("missing --token-file FILE: where to write the new user's token (never printed)");
    const created = await unwrap(
      s.api.POST('/api/v1/users', {
        body: { name, global_role: ctx.values.admin === true ? 'admin' : 'user' },
      }),
      s.url,
    );
    rememberSecret(created.token);
    writeSecret(file, created.token);
    stdout.write(
      ctx.json
        ? json({ user: created.user, token_file: file })
        : `created user ${created.user.name} (${created.user.global_role}); token written to ${file} (mode 0600)\n`,
    );
    return EXIT.OK;
  }
  if (sub !== undefined) throw usageError(`unknown users subcommand ${sub} (create)`);
  const me = await unwrap(s.api.GET('/api/v1/users/me'), s.url);
  stdout.write(
    ctx.json
      ? json(me)
      : table(['USER', 'ROLE', 'ID', 'CREATED'], [[me.name, me.global_role, me.id, age(me.created_at)]]),
  );
  return EXIT.OK;
}

export async function tokens(ctx: Context): Promise<number> {
  const s: Session = openSession();
  const [sub] = ctx.positionals;
  if (sub === 'create') {
    const file = str(ctx.values, 'token-file');
    const intoConfig = ctx.values.login === true;
    if (!file && !intoConfig)
      throw usageError(
        'say where the new token goes: --token-file FILE, or --login (the config file); it is never printed',
      );
    const issued = await unwrap(s.api.POST('/api/v1/users/me/tokens'), s.url);
    rememberSecret(issued.token);
    if (file) writeSecret(file, issued.token);
    if (intoConfig) writeConfig({ ...readConfig(), url: s.url, token: issued.token });
    const where = [file ? `${file} (mode 0600)` : '', intoConfig ? configPath() : ''].filter(Boolean).join(' and ');
    stdout.write(
      ctx.json
        ? json({ id: issued.id, created_at: issued.created_at, written_to: where })
        : `created token ${issued.id}; written to ${where}\n`,
    );
    return EXIT.OK;
  }
  if (sub === 'revoke') {
    const tokenId = arg(ctx, 1, 'the token id (runplane tokens lists them)');
    await unwrap(s.api.DELETE('/api/v1/users/me/tokens/{tokenId}', { params: { path: { tokenId } } }), s.url);
    stdout.write(ctx.json ? json({ id: tokenId, revoked: true }) : `revoked token ${tokenId}\n`);
    return EXIT.OK;
  }
  if (sub !== undefined) throw usageError(`unknown tokens subcommand ${sub} (create, revoke)`);
  const list = await allPages((cursor) =>
    unwrap(s.api.GET('/api/v1/users/me/tokens', { params: { query: cursorQuery(cursor) } }), s.url),
  );
  if (ctx.json) stdout.write(json(list));
  else
    stdout.write(
      table(
        ['TOKEN ID', 'CREATED'],
        list.map((t) => [t.id, `${t.created_at} (${age(t.created_at)} ago)`]),
      ),
    );
  return EXIT.OK;
}
