import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { QueryFailedError } from 'typeorm';
import { databaseFailure } from './database-unavailable';
import { DomainError, ErrorCode } from './domain-error';
import { fromPostgresError } from './postgres-errors';
import { bodyParserError } from '../http/raw-request';

export interface ErrorBody {
  status_code: number;
  code: string;
  message: string;
  details: unknown[];
}

const HTTP_CODES: Record<number, ErrorCode> = {
  400: 'VALIDATION_FAILED',
  401: 'UNAUTHENTICATED',
  402: 'BILLING_LIMIT_EXCEEDED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  408: 'REQUEST_TIMEOUT',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  422: 'UNPROCESSABLE',
  429: 'TOO_MANY_REQUESTS',
  431: 'REQUEST_HEADERS_TOO_LARGE',
  503: 'SERVICE_UNAVAILABLE',
};

/** What a 503 tells clients to wait before trying again: the trouble (a lost connection, a deadlock) is brief. */
const RETRY_AFTER_SECONDS = '1';

/** The one place errors become the API's error JSON: domain errors, HTTP errors, Postgres errors, and the rest. */
@Catch()
export class ApiExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  /** Also what fails before a route's handler runs (a body that cannot be read): Nest hands Fastify's errors here. */
  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const res = ctx.getResponse<FastifyReply>();
    const body = this.toBody(exception, ctx.getRequest<FastifyRequest>());
    if (res.sent || res.raw.headersSent) return;
    if (body.status_code === 503 && !res.getHeader('Retry-After')) void res.header('Retry-After', RETRY_AFTER_SECONDS);
    void res.status(body.status_code).send(body);
  }

  private toBody(exception: unknown, req: FastifyRequest): ErrorBody {
    if (exception instanceof DomainError)
      return shape(exception.status, exception.code, exception.message, exception.details);
    if (exception instanceof HttpException) return fromHttpException(exception);
    // The body parser's errors (raw-request.ts).
    const parserError = bodyParserError(exception);
    if (parserError) return shape(parserError.status, parserError.code, parserError.message, parserError.details);
    const failure = databaseFailure(exception);
    if (failure) {
      this.logger.warn({ err: exception, path: req.url, failure }, 'database unavailable');
      return shape(503, 'DATABASE_UNAVAILABLE', 'the database is unavailable; retry the request shortly', []);
    }
    const pgError =
      exception instanceof QueryFailedError
        ? (exception.driverError as { code?: string; constraint?: string })
        : undefined;
    const mapped = pgError ? fromPostgresError(pgError) : fromPostgresError(exception as { code?: string });
    if (mapped) {
      if (mapped.status >= 500) this.logger.warn({ err: exception, path: req.url }, 'transient database error');
      // A request can cause a foreign-key conflict (a reference to a deleted record); a server pass never should.
      else if (pgError?.code === '23503') this.logger.warn({ err: exception, path: req.url }, 'foreign-key conflict');
      // A CHECK the app's own writes break is a bug of the app's (requests are validated before): say which.
      else if (pgError?.code === '23514')
        this.logger.warn({ err: exception, path: req.url, constraint: pgError.constraint }, 'check constraint broken');
      return shape(mapped.status, mapped.code, mapped.message, mapped.details);
    }
    this.logger.error({ err: exception, path: req.url }, 'unhandled error');
    return shape(500, 'INTERNAL_ERROR', 'internal error', []);
  }
}

/** A domain error as the API shows it (for answers that carry errors inside a 200, like a batch's results). */
export function domainErrorBody(e: DomainError): ErrorBody {
  return shape(e.status, e.code, e.message, e.details);
}

function shape(status: number, code: string, message: string, details: unknown[]): ErrorBody {
  return { status_code: status, code, message, details };
}

function fromHttpException(exception: HttpException): ErrorBody {
  const status = exception.getStatus();
  const response = exception.getResponse();
  const code = HTTP_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'CONFLICT');
  if (typeof response === 'object' && response !== null) {
    const r = response as { message?: unknown; details?: unknown[]; code?: string };
    if (Array.isArray(r.details))
      return shape(status, r.code ?? code, String(r.message ?? exception.message), r.details);
    if (Array.isArray(r.message)) return shape(status, code, r.message.join('; '), r.message);
    if (typeof r.message === 'string') return shape(status, code, r.message, []);
  }
  if (status === HttpStatus.NOT_FOUND) return shape(status, code, 'route not found', []);
  return shape(status, code, exception.message, []);
}
