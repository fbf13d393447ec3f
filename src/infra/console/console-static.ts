import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join, resolve, sep } from 'node:path';
import { urlPath } from '../../common/http/raw-request';

/** Paths the API, its docs and the operations routes own: the console never answers there (their 404 stays JSON). */
const SERVER_PATHS = /^\/(api|internal|admin|docs|docs-json|healthz|readyz|metrics)(\/|$)/;

/**
 * Where `vite build` (run by `npm run build`) put the console: `dist/console` under the package root, found by
 * walking up from this file, so it is the same folder from `dist/src/...` (served) and `src/...` (tests).
 */
export function consoleDir(from = __dirname): string | undefined {
  for (let dir = from; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) {
      const out = join(dir, 'dist', 'console');
      return existsSync(join(out, 'index.html')) ? out : undefined;
    }
  }
  return undefined;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** A regular file under `dir` named by a URL path (no `..`, no dot-files), or undefined. */
function fileUnder(dir: string, urlPath: string): { path: string; size: number } | undefined {
  let name: string;
  try {
    name = decodeURIComponent(urlPath);
  } catch {
    return undefined;
  }
  if (name.includes('\0') || name.split('/').some((part) => part.startsWith('.'))) return undefined;
  const path = resolve(dir, `.${name}`);
  if (!path.startsWith(dir + sep)) return undefined;
  try {
    const st = statSync(path);
    return st.isFile() ? { path, size: st.size } : undefined;
  } catch {
    return undefined;
  }
}

function sendFile(req: IncomingMessage, res: ServerResponse, file: { path: string; size: number }, cache: string) {
  res.statusCode = 200;
  res.setHeader('Content-Type', CONTENT_TYPES[extname(file.path)] ?? 'application/octet-stream');
  res.setHeader('Content-Length', file.size);
  res.setHeader('Cache-Control', cache);
  if (req.method === 'HEAD') return void res.end();
  createReadStream(file.path)
    .on('error', () => res.destroy())
    .pipe(res);
}

/**
 * The web console: its hashed assets (cached for good), and its index.html for every other browser navigation
 * outside the server's own paths, so any deep link (/projects/p/runs/r) loads the app, which routes it.
 */
export function consoleMiddleware(dir = consoleDir()) {
  return (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    const path = urlPath(req.url);
    if ((req.method !== 'GET' && req.method !== 'HEAD') || SERVER_PATHS.test(path) || !dir) return next();
    if (path.startsWith('/assets/')) {
      const asset = fileUnder(dir, path);
      return asset ? sendFile(req, res, asset, 'public, max-age=31536000, immutable') : next();
    }
    // A navigation, not an asset: curl and API clients asking for an unknown path still get the JSON 404.
    if (path !== '/' && !(req.headers.accept ?? '').includes('text/html')) return next();
    if (path !== '/' && /\.[a-z0-9]+$/i.test(path)) return next();
    const index = fileUnder(dir, '/index.html');
    return index ? sendFile(req, res, index, 'no-cache') : next();
  };
}
