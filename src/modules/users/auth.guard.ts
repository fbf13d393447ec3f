import { CanActivate, ExecutionContext, Injectable, Logger } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ACCESS_KEY, AccessLevel, Principal } from '../../common/auth/principal';
import { DomainError } from '../../common/errors/domain-error';
import { RateLimiterService } from './rate-limiter.service';
import { UsersService } from './users.service';

/**
 * The global guard: every route declares its access level (see `Access`), and a route without one is refused,
 * so forgetting to protect a route fails closed.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  private readonly logger = new Logger(AuthGuard.name);

  constructor(
    private readonly reflector: Reflector,
    private readonly users: UsersService,
    private readonly rateLimiter: RateLimiterService,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const level = this.reflector.getAllAndOverride<AccessLevel | undefined>(ACCESS_KEY, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!level) {
      this.logger.error(`route ${context.getClass().name}.${context.getHandler().name} declares no access level`);
      throw new DomainError('FORBIDDEN', 'route is not open to anyone');
    }
    if (level === 'public') return true;
    const req = context.switchToHttp().getRequest<FastifyRequest & { principal?: Principal }>();
    const token = bearerToken(req.headers.authorization);
    if (!token) throw new DomainError('UNAUTHENTICATED', 'missing bearer token');
    const principal = await this.users.authenticate(token);
    if (!principal) throw new DomainError('UNAUTHENTICATED', 'invalid token');
    req.principal = principal;
    // Counted here, once the principal is known: the limit is per principal, never per address.
    const retryAfter = await this.rateLimiter.hit(principal);
    if (retryAfter !== undefined) {
      context.switchToHttp().getResponse<FastifyReply>().header('Retry-After', String(retryAfter));
      throw new DomainError('RATE_LIMITED', `too many requests from ${principal.name}; retry after ${retryAfter} s`);
    }
    const allowed =
      level === 'service'
        ? principal.globalRole === 'service'
        : level === 'admin'
          ? principal.globalRole === 'admin'
          : principal.globalRole !== 'service';
    if (!allowed)
      throw new DomainError('FORBIDDEN', `this route needs a ${level === 'user' ? 'user or admin' : level} token`);
    return true;
  }
}

function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S{1,512})\s*$/i.exec(header);
  return match?.[1];
}
