import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { catchError, defer, Observable, throwError, timer, switchMap } from 'rxjs';
import { isRetryableConnectionLoss, markRetried } from '../../common/errors/database-unavailable';

/** A pause before the one retry: long enough for the pool to drop the dead connection, short for the client. */
const RETRY_DELAY_MS = 25;

/**
 * Runs a read once more when its connection was lost. Only for work that changes nothing (a read, or a
 * transaction that never reached COMMIT is already retried by TransactionRunner), so running it twice is safe.
 */
export async function retryReadOnce<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (!isRetryableConnectionLoss(err)) throw err;
    await new Promise((r) => setTimeout(r, RETRY_DELAY_MS));
    try {
      return await read();
    } catch (again) {
      markRetried(again);
      throw again;
    }
  }
}

/**
 * GET and HEAD handlers only read (HTTP calls them safe, and every one here is): one whose database connection
 * was lost runs once more on a new connection before the client sees a 503. Other methods pass through; their
 * transactions are retried, when safe, by TransactionRunner. Put on the controllers that serve GETs, not globally:
 * Nest wraps every interceptor in an AsyncResource and an rxjs chain per request, a cost the workers' POST-only
 * routes (the hot path) should not pay.
 */
@Injectable()
export class ReadRetryInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const method = context.switchToHttp().getRequest<FastifyRequest>().method;
    if (method !== 'GET' && method !== 'HEAD') return next.handle();
    return next.handle().pipe(
      catchError((err: unknown) => {
        if (!isRetryableConnectionLoss(err)) return throwError(() => err);
        return timer(RETRY_DELAY_MS).pipe(
          switchMap(() => defer(() => next.handle())),
          catchError((again: unknown) => {
            markRetried(again);
            return throwError(() => again);
          }),
        );
      }),
    );
  }
}
