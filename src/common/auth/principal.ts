import { createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';

export type GlobalRole = 'admin' | 'user' | 'service';
export const GLOBAL_ROLES: GlobalRole[] = ['admin', 'user', 'service'];

/** Who is calling, resolved from the bearer token by the global auth guard. */
export interface Principal {
  userId: string;
  name: string;
  globalRole: GlobalRole;
}

/**
 * Who may call a route: `public` (no token), `user` (users and admins; project checks happen in the service),
 * `admin` (global admins), `service` (service accounts: the internal worker API). Every route must declare one;
 * the guard refuses routes that don't.
 */
export type AccessLevel = 'public' | 'user' | 'admin' | 'service';
export const ACCESS_KEY = 'runplane:access';
export const Access = (level: AccessLevel) => SetMetadata(ACCESS_KEY, level);

export const CurrentPrincipal = createParamDecorator((_: unknown, ctx: ExecutionContext): Principal => {
  const req = ctx.switchToHttp().getRequest<{ principal?: Principal }>();
  if (!req.principal) throw new Error('CurrentPrincipal used on a route without authentication');
  return req.principal;
});
