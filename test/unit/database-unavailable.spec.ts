import { Logger } from '@nestjs/common';
import { DatabaseError } from 'pg';
import { QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { ApiExceptionFilter } from '../../src/common/errors/api-exception.filter';
import { databaseFailure, isRetryableConnectionLoss } from '../../src/common/errors/database-unavailable';
import { DomainError } from '../../src/common/errors/domain-error';
import { retryReadOnce } from '../../src/infra/database/read-retry';

const pgError = (code: string, message = 'server says no') =>
  Object.assign(new DatabaseError(message, 0, 'error'), { code });
const failedQuery = (driverError: Error) => new QueryFailedError('SELECT 1', [], driverError);
const errno = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code });

describe('telling a database outage from everything else', () => {
  it.each([
    [
      'pg_terminate_backend mid-query (57P01)',
      failedQuery(pgError('57P01', 'terminating connection due to administrator command')),
    ],
    ['a crashed server (57P02)', failedQuery(pgError('57P02'))],
    ['a server starting up (57P03, at connect)', pgError('57P03', 'the database system is starting up')],
    ['a connection exception (08006)', failedQuery(pgError('08006'))],
    ['a protocol violation (08P01)', failedQuery(pgError('08P01'))],
    ['too many connections (53300)', pgError('53300')],
    ['connection refused', errno('ECONNREFUSED')],
    ['connection reset', failedQuery(errno('ECONNRESET'))],
    [
      'every address refused',
      Object.assign(new AggregateError([errno('ECONNREFUSED'), errno('ECONNREFUSED')]), { code: undefined }),
    ],
    ['the socket closing under a query', failedQuery(new Error('Connection terminated unexpectedly'))],
    [
      'a client the pool still held after its error',
      failedQuery(new Error('Client has encountered a connection error and is not queryable')),
    ],
    ['a query runner TypeORM released when its connection died', new QueryRunnerAlreadyReleasedError()],
    ['a transaction manager whose runner was released', new QueryRunnerProviderAlreadyReleasedError()],
  ])('%s: connection lost, worth one retry', (_, err) => {
    expect(databaseFailure(err)).toBe('connection_lost');
    expect(isRetryableConnectionLoss(err)).toBe(true);
  });

  it.each([
    ['no pooled connection in time', new Error('timeout exceeded when trying to connect')],
    ['a connect that timed out', new Error('Connection terminated due to connection timeout')],
    ['a dropped database (3D000)', pgError('3D000', 'database "gone" does not exist')],
    ['bad credentials (28P01)', pgError('28P01')],
  ])('%s: unreachable, 503 but not retried at once', (_, err) => {
    expect(databaseFailure(err)).toBe('unreachable');
    expect(isRetryableConnectionLoss(err)).toBe(false);
  });

  it.each([
    ['a unique violation', failedQuery(pgError('23505'))],
    ['a deadlock (retried elsewhere, SERVICE_UNAVAILABLE)', failedQuery(pgError('40P01'))],
    ['a syntax error', failedQuery(pgError('42601'))],
    ['a plain bug', new TypeError('x is undefined')],
    ['a domain error', new DomainError('NOT_FOUND', 'run not found')],
    ['not an error', 'oops'],
  ])('%s: not a database outage', (_, err) => {
    expect(databaseFailure(err)).toBeUndefined();
  });
});

describe('the error filter on database trouble', () => {
  beforeAll(() => Logger.overrideLogger(false)); // the filter logs each; not wanted in the test output
  const respond = (exception: unknown) => {
    const sent: { status?: number; body?: unknown; headers: Record<string, string> } = { headers: {} };
    // What the filter uses of Fastify's reply.
    const res = {
      sent: false,
      raw: { headersSent: false },
      getHeader: (k: string) => sent.headers[k.toLowerCase()],
      header(k: string, v: string) {
        sent.headers[k.toLowerCase()] = v;
        return this;
      },
      status(s: number) {
        sent.status = s;
        return this;
      },
      send(b: unknown) {
        sent.body = b;
        return this;
      },
    };
    const host = { switchToHttp: () => ({ getResponse: () => res, getRequest: () => ({ url: '/x' }) }) };
    new ApiExceptionFilter().catch(exception, host as never);
    return sent;
  };

  it('answers 503 DATABASE_UNAVAILABLE with Retry-After for a lost connection', () => {
    const sent = respond(failedQuery(pgError('57P01')));
    expect(sent.status).toBe(503);
    expect(sent.headers['retry-after']).toBe('1');
    expect(sent.body).toEqual({
      status_code: 503,
      code: 'DATABASE_UNAVAILABLE',
      message: expect.any(String),
      details: [],
    });
  });

  it('sends Retry-After with SERVICE_UNAVAILABLE (a deadlock that outlived its retries, a lock timeout) too', () => {
    const sent = respond(failedQuery(pgError('55P03')));
    expect(sent.status).toBe(503);
    expect(sent.headers['retry-after']).toBe('1');
    expect(sent.body).toMatchObject({ code: 'SERVICE_UNAVAILABLE' });
  });

  it('sends no Retry-After on other errors', () => {
    const sent = respond(new DomainError('NOT_FOUND', 'run not found'));
    expect(sent.status).toBe(404);
    expect(sent.headers['retry-after']).toBeUndefined();
  });
});

describe('retryReadOnce', () => {
  it('runs a read again once when its connection was lost', async () => {
    let calls = 0;
    const got = await retryReadOnce(async () => {
      if (++calls === 1) throw failedQuery(new Error('Connection terminated unexpectedly'));
      return 'rows';
    });
    expect(got).toBe('rows');
    expect(calls).toBe(2);
  });

  it('retries no other error, and gives up after the second loss (marked, so no outer layer retries it)', async () => {
    let calls = 0;
    await expect(
      retryReadOnce(async () => (calls++, Promise.reject(failedQuery(pgError('42601'))))),
    ).rejects.toBeInstanceOf(QueryFailedError);
    expect(calls).toBe(1);
    calls = 0;
    const err = await retryReadOnce(async () => (calls++, Promise.reject(failedQuery(pgError('57P01'))))).catch(
      (e: unknown) => e,
    );
    expect(calls).toBe(2);
    expect(databaseFailure(err)).toBe('connection_lost');
    expect(isRetryableConnectionLoss(err)).toBe(false);
  });
});
