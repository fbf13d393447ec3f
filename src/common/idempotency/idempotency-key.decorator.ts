import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../errors/domain-error';

/** The `Idempotency-Key` header, checked: 1-255 visible ASCII characters. */
export const IdempotencyKey = createParamDecorator((_: unknown, ctx: ExecutionContext): string | undefined => {
  const value = ctx.switchToHttp().getRequest<FastifyRequest>().headers['idempotency-key'];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(value)) {
    throw new DomainError('VALIDATION_FAILED', 'Idempotency-Key must be 1-255 visible ASCII characters', [
      { field: 'Idempotency-Key', message: 'must be 1-255 visible ASCII characters' },
    ]);
  }
  return value;
});
