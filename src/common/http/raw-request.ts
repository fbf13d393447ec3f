import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { DomainError } from '../errors/domain-error';
import { unstorableText } from '../validation/input-guard';

/**
 * A path no route can name: a segment that is not percent-encoded UTF-8 (`%ff`, an encoded lone surrogate) or
 * that decodes to NUL. 404 with the error shape before any routing, so neither the router (400 without a field)
 * nor a query (NUL is a 500 from PostgreSQL) meets it.
 */
export function pathTextGuard(): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    if (!req.url.includes('%')) return next(); // nothing encoded: every segment is plain text (the common case)
    const segments = req.path.split('/');
    for (let i = 1; i < segments.length; i++) {
      if (!segments[i].includes('%')) continue;
      let decoded: string;
      try {
        decoded = decodeURIComponent(segments[i]);
      } catch {
        return next(unnamedPath(i, 'is not percent-encoded UTF-8'));
      }
      const why = unstorableText(decoded);
      if (why) return next(unnamedPath(i, why));
    }
    next();
  };
}

const unnamedPath = (segment: number, why: string) =>
  new DomainError('NOT_FOUND', `no resource has this path: segment ${segment} ${why}`, [
    { field: 'path', message: `segment ${segment} ${why}` },
  ]);

/**
 * Body-parser's errors (http-errors with a `type`) as API errors naming `body`. Nest would turn the parser's
 * SyntaxError into a 400 whose message quotes the parser, and answer 415s (unknown charset or encoding) with 500.
 */
export function bodyParserError(err: unknown): DomainError | undefined {
  const e = err as { type?: unknown; status?: unknown; message?: unknown } | null;
  if (!e || typeof e.type !== 'string' || typeof e.status !== 'number' || e.status < 400 || e.status >= 500)
    return undefined;
  const named = (code: ConstructorParameters<typeof DomainError>[0], message: string) =>
    new DomainError(code, `body ${message}`, [{ field: 'body', message }]);
  if (e.status === 413)
    return named('PAYLOAD_TOO_LARGE', e.type === 'parameters.too.many' ? 'has too many parameters' : 'is too large');
  if (e.status === 415)
    return named(
      'UNSUPPORTED_MEDIA_TYPE',
      `has an unsupported ${e.type === 'charset.unsupported' ? 'charset' : 'content encoding'}`,
    );
  if (e.type === 'entity.parse.failed') return named('VALIDATION_FAILED', 'is not valid JSON');
  return named('VALIDATION_FAILED', 'could not be read');
}

/** Express error middleware placed right after the body parsers. */
export function bodyParserErrors() {
  return (err: unknown, _req: Request, _res: Response, next: NextFunction) => next(bodyParserError(err) ?? err);
}

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
 * Requests Node's HTTP parser refuses never reach Express; without a listener Node answers them with an empty
 * body (a 100 KB cursor got a bare 431). This answers them with the error shape, then closes the connection as Node
 * does (the rest of the request can't be framed).
 */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Socket) => {
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
  });
}
