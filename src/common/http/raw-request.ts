import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { DomainError } from '../errors/domain-error';
import { unstorableText } from '../validation/input-guard';

/**
 * A path no route can name: a segment that is not percent-encoded UTF-8 (`%ff`, an encoded lone surrogate) or
 * that decodes to NUL. 404 with the error shape before any routing, so neither the router (400 without a field)
 * nor a query (NUL is a 500 from PostgreSQL) meets it.
 */
export function pathTextGuard() {
  return (req: IncomingMessage, _res: ServerResponse, next: (err?: unknown) => void) => next(unnamedPathError(req.url));
}

/** A request URL's path, without its query (Node's `req.url`, which Express's `req.path` used to give). */
export const urlPath = (url = '/'): string => url.split('?', 1)[0];

/** Why no route can name this URL's path (see pathTextGuard), or undefined when it is plain text. */
export function unnamedPathError(url = '/'): DomainError | undefined {
  if (!url.includes('%')) return undefined; // nothing encoded: every segment is plain text (the common case)
  const segments = urlPath(url).split('/');
  for (let i = 1; i < segments.length; i++) {
    if (!segments[i].includes('%')) continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(segments[i]);
    } catch {
      return unnamedPath(i, 'is not percent-encoded UTF-8');
    }
    const why = unstorableText(decoded);
    if (why) return unnamedPath(i, why);
  }
  return undefined;
}

const unnamedPath = (segment: number, why: string) =>
  new DomainError('NOT_FOUND', `no resource has this path: segment ${segment} ${why}`, [
    { field: 'path', message: `segment ${segment} ${why}` },
  ]);

/**
 * What reading a body met before a parser could judge it, as an API error naming `body`: Fastify's (a body over the
 * limit, a Content-Length that does not match) and zlib's (a compressed body that does not inflate). The parsers'
 * own refusals (body-parsers.ts) are domain errors already.
 */
export function bodyParserError(err: unknown): DomainError | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return named('PAYLOAD_TOO_LARGE', 'is too large');
  if (code.startsWith('FST_ERR_CTP_') || code.startsWith('Z_') || code.includes('BROTLI'))
    return named('VALIDATION_FAILED', 'could not be read');
  return undefined;
}

const named = (code: ConstructorParameters<typeof DomainError>[0], message: string) =>
  new DomainError(code, `body ${message}`, [{ field: 'body', message }]);

/** What Node's HTTP parser refused, as the status Node itself would send. */
function clientErrorStatus(code: string | undefined): {
  status: number;
  code: ConstructorParameters<typeof DomainError>[0];
} {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { status: 431, code: 'REQUEST_HEADERS_TOO_LARGE' };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, code: 'PAYLOAD_TOO_LARGE' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'REQUEST_TIMEOUT' };
    default:
      return { status: 400, code: 'VALIDATION_FAILED' };
  }
}

/**
 * Which part of an over-long request head ran over, from the bytes the parser had: its longest line, named by the
 * longest query parameter (e.g. `cursor`) or `path` when it is the request line, by the header's name otherwise.
 */
export function overflowingField(raw: Buffer | undefined): string {
  if (!raw) return 'headers';
  const lines = raw.toString('latin1').split('\r\n');
  const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
  const requestLine = /^[A-Z]{3,10} (\S+)/.exec(longest);
  if (requestLine && longest === lines[0]) {
    const query = requestLine[1].split('?')[1];
    if (query === undefined) return 'path';
    const param = query
      .split('&')
      .reduce((a, b) => (b.length > a.length ? b : a), '')
      .split('=')[0];
    try {
      return decodeURIComponent(param) || 'query';
    } catch {
      return 'query';
    }
  }
  const header = /^([!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}):/.exec(longest);
  return header ? header[1].toLowerCase() : 'headers';
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
};

/**
 * Requests Node's HTTP parser refuses never reach the router; left to Node (or Fastify) they are answered with an
 * empty or foreign body (a 100 KB cursor got a bare 431). This answers them with the error shape, then closes the
 * connection as Node does (the rest of the request can't be framed).
 */
export function answerClientError(error: Error, socket: Socket): void {
  const err = error as NodeJS.ErrnoException & { rawPacket?: Buffer };
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent) {
    const { status, code } = clientErrorStatus(err.code);
    const field = status === 431 ? overflowingField(err.rawPacket) : 'request';
    const message =
      status === 431
        ? `${field} makes the request line and headers too large`
        : status === 408
          ? 'the request was not received in time'
          : 'the request is not valid HTTP/1.1';
    const body = JSON.stringify({
      status_code: status,
      code,
      message,
      details: [{ field, message: status === 431 ? 'is too large' : 'is malformed' }],
    });
    socket.write(
      `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
