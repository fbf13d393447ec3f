import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { NextFunction, Request, Response } from 'express';

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

/**
 * The web console: its hashed assets (cached for good), and its index.html for every other browser navigation
 * outside the server's own paths, so any deep link (/projects/p/runs/r) loads the app, which routes it.
 */
export function consoleMiddleware(dir = consoleDir()) {
  return (req: Request, res: Response, next: NextFunction): void => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || SERVER_PATHS.test(req.path) || !dir) return next();
    if (req.path.startsWith('/assets/')) {
      res.sendFile(req.path, { root: dir, immutable: true, maxAge: '365d', dotfiles: 'deny' }, (err) => {
        if (err) next();
      });
      return;
    }
    // A navigation, not an asset: curl and API clients asking for an unknown path still get the JSON 404.
    if (req.path !== '/' && !(req.headers.accept ?? '').includes('text/html')) return next();
    if (req.path !== '/' && /\.[a-z0-9]+$/i.test(req.path)) return next();
    res.setHeader('Cache-Control', 'no-cache');
    res.sendFile('index.html', { root: dir }, (err) => {
      if (err) next();
    });
  };
}
