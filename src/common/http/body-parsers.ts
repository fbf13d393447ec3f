import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { DomainError } from '../errors/domain-error';

const bodyError = (code: ConstructorParameters<typeof DomainError>[0], message: string) =>
  new DomainError(code, `body ${message}`, [{ field: 'body', message }]);

/** The charset a Content-Type names, lower-cased, or undefined. */
function charsetOf(contentType: string | undefined): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '')?.[1]?.toLowerCase();
}

/**
 * A JSON body as the API reads it: an object or an array (anything else is not a body), `{}` when empty, keys such
 * as `__proto__` kept as plain fields (JSON.parse never pollutes a prototype) so validation names them, UTF-8 only.
 */
function parseJson(req: FastifyRequest, text: string): unknown {
  const charset = charsetOf(req.headers['content-type']);
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
    throw bodyError('UNSUPPORTED_MEDIA_TYPE', 'has an unsupported charset');
  if (text.length === 0) return {};
  const first = /\S/.exec(text)?.[0];
  if (first !== '{' && first !== '[') throw bodyError('VALIDATION_FAILED', 'is not valid JSON');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw bodyError('VALIDATION_FAILED', 'is not valid JSON');
  }
}

/** A compressed request body (gzip, deflate, br) inflated as it is read; any other coding is refused (415). */
function decoded(req: FastifyRequest, payload: Readable): Readable {
  const coding = String(req.headers['content-encoding'] ?? 'identity')
    .trim()
    .toLowerCase();
  if (coding === 'identity' || coding === '') return payload;
  const inflate =
    coding === 'gzip' || coding === 'x-gzip'
      ? createGunzip()
      : coding === 'deflate'
        ? createInflate()
        : coding === 'br'
          ? createBrotliDecompress()
          : undefined;
  if (!inflate) throw bodyError('UNSUPPORTED_MEDIA_TYPE', 'has an unsupported content encoding');
  // Fastify checks Content-Length against the bytes that came, which it reads here once the body is inflated.
  const counted = Object.assign(inflate, { receivedEncodedLength: 0 });
  payload.on('data', (chunk: Buffer) => (counted.receivedEncodedLength += chunk.length));
  payload.on('error', (err) => inflate.destroy(err));
  return payload.pipe(counted);
}

/**
 * The bodies the API reads: JSON (up to the server's body limit), log chunks as bytes (`application/octet-stream`,
 * up to `maxChunkBytes`: no text encoding or JSON to undo) and forms. A body of any other type is left unread, as if
 * absent: a route that takes a body then says what is wrong with it, one that takes none refuses it by its framing
 * (BodylessRoutesGuard).
 */
export function registerBodyParsers(fastify: FastifyInstance, maxChunkBytes: number): void {
  fastify.removeAllContentTypeParsers();
  fastify.addHook('preParsing', (req, _reply, payload, done) => {
    try {
      done(null, req.headers['content-encoding'] === undefined ? payload : decoded(req, payload));
    } catch (err) {
      done(err as Error);
    }
  });
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    try {
      done(null, parseJson(req, body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  fastify.addContentTypeParser(
    'application/octet-stream',
    { parseAs: 'buffer', bodyLimit: maxChunkBytes },
    (_req, body, done) => done(null, body),
  );
  fastify.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) =>
    done(null, Object.fromEntries(new URLSearchParams(body as string))),
  );
  fastify.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
}
