import compression from 'compression';
import type { RequestHandler, Response } from 'express';
import { constants } from 'node:zlib';

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

/**
 * Compresses responses of these types of 1 KiB or more for clients that accept it (brotli preferred, then gzip),
 * streamed as they are written (compression, the Express project's middleware).
 */
export function compressJson(): RequestHandler {
  return compression({
    threshold: COMPRESS_THRESHOLD_BYTES,
    level: GZIP_LEVEL,
    brotli: { params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } },
    filter: (_req, res: Response) => COMPRESSED_TYPES.test(String(res.getHeader('Content-Type') ?? '')),
  });
}
