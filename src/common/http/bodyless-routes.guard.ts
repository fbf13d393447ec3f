import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import type { FastifyRequest } from 'fastify';
import { DomainError } from '../errors/domain-error';

/** Whether a handler reads the body (has a `@Body()` parameter), from the metadata Nest's decorators leave. */
function takesBody(controller: object, handler: string): boolean {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, handler) ?? {}) as Record<string, unknown>;
  return Object.keys(args).some((key) => Number(key.split(':')[0]) === RouteParamtypes.BODY);
}

/**
 * Routes that take no body (`POST /users/me/tokens`, `POST /admin/v1/maintenance/cleanup`, DELETEs, GETs) refuse
 * one instead of ignoring it: each field of a JSON object is named as an unknown field would be, anything else
 * is named `body`. An empty body and `{}` (no fields) are accepted, since many clients send `{}` with every POST.
 * A guard, not an interceptor: Nest wraps each interceptor in an AsyncResource and an rxjs chain per request, which
 * cost the worker routes ~4% of their CPU in the lifecycle bench; a guard is one call.
 */
@Injectable()
export class BodylessRoutesGuard implements CanActivate {
  private readonly cache = new Map<unknown, boolean>();

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return true;
    const handler = context.getHandler();
    let reads = this.cache.get(handler);
    if (reads === undefined) {
      reads = takesBody(context.getClass(), handler.name);
      this.cache.set(handler, reads);
    }
    if (!reads) refuseBody(context.switchToHttp().getRequest<FastifyRequest>());
    return true;
  }
}

function refuseBody(req: FastifyRequest): void {
  const body: unknown = req.body;
  if (body !== undefined) {
    // Parsed (JSON or a form): judged by its content.
    if (typeof body === 'object' && body !== null && !Array.isArray(body)) {
      const fields = Object.keys(body);
      if (fields.length === 0) return;
      throw new DomainError(
        'VALIDATION_FAILED',
        `this route takes no body: ${fields.map((f) => `${f} should not exist`).join('; ')}`,
        fields.map((field) => ({ field, message: 'should not exist' })),
      );
    }
  } else {
    // Not parsed (no or another content type): judged by its framing.
    const length = Number(req.headers['content-length'] ?? 0);
    const chunked = req.headers['transfer-encoding'] !== undefined && req.headers['content-type'] !== undefined;
    if (!(length > 0) && !chunked) return;
  }
  throw new DomainError('VALIDATION_FAILED', 'this route takes no body', [
    { field: 'body', message: 'should not exist (this route takes no body)' },
  ]);
}
