import compression from 'compression';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { constants } from 'node:zlib';
import { urlPath } from './raw-request';

/**
 * Levels chosen by measurement (`npm run bench -- compression`, README "Compression"): on a 381 KiB runs-list page
 * gzip level 1 gave 28.9 KiB in 0.8 ms against level 6's 26.3 KiB in 2.0 ms, and brotli quality 1 26.2 KiB in
 * 0.3 ms against quality 5's 24.4 KiB in 2.4 ms: the CPU is the server's, the bytes barely differ.
 */
export const GZIP_LEVEL = 1;
export const BROTLI_QUALITY = 1;
/** Smaller bodies gain nothing worth a compressor's set-up. */
export const COMPRESS_THRESHOLD_BYTES = 1024;

/** JSON, and the console's own files: never event streams, which must reach the client as they are written. */
const COMPRESSED_TYPES = /^(application\/json|text\/html|text\/css|text\/javascript|application\/javascript)\b/;

/** A client that accepts gzip or brotli (the middleware picks among them); anything else gets the body as it is. */
const ACCEPTS_COMPRESSION = /\b(gzip|br)\b/;
/** A worker's reports about one submission: answers of a few hundred bytes, at thousands a second. */
const SMALL_ANSWERS = /^\/internal\/v1\/submissions\/[^/]+\/(running|heartbeat|complete)$/;

/**
 * Compresses responses of these types of 1 KiB or more for clients that accept it (brotli preferred, then gzip),
 * streamed as they are written (compression, the Express project's middleware). Requests that cannot get a
 * compressed answer (no gzip or brotli accepted, or a route whose answers are always small) skip the middleware:
 * wrapping a response costs its set-up even when nothing is compressed (about 7 % of the server's CPU on a
 * worker's `complete`).
 */
export function compressJson() {
  const compress = compression({
    threshold: COMPRESS_THRESHOLD_BYTES,
    level: GZIP_LEVEL,
    brotli: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    filter: (_req, res) => COMPRESSED_TYPES.test(String(res.getHeader('Content-Type') ?? '')),
  });
  return (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => {
    if (SMALL_ANSWERS.test(urlPath(req.url))) return next();
    if (!ACCEPTS_COMPRESSION.test(String(req.headers['accept-encoding'] ?? ''))) {
      // The answer depends on the header all the same (a cache must not hand this one to a client that accepts).
      varyOnAcceptEncoding(res);
      return next();
    }
    return compress(req as Parameters<typeof compress>[0], res as Parameters<typeof compress>[1], next);
  };
}

function varyOnAcceptEncoding(res: ServerResponse): void {
  const vary = res.getHeader('Vary');
  if (vary === undefined) res.setHeader('Vary', 'Accept-Encoding');
  else if (!/\baccept-encoding\b/i.test(String(vary))) res.setHeader('Vary', `${String(vary)}, Accept-Encoding`);
}
