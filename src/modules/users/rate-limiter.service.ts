import { Injectable } from '@nestjs/common';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { Principal } from '../../common/auth/principal';
import { Env } from '../../config/env';

/**
 * Request rate per principal (the user or service account behind the token, so minting more tokens buys no more
 * requests): a fixed window per principal, in this instance's memory. O(1) per request; several instances each
 * allow the full rate.
 */
@Injectable()
export class RateLimiterService {
  private readonly users?: RateLimiterMemory;
  private readonly services?: RateLimiterMemory;

  constructor(env: Env) {
    const duration = env.RUNPLANE_RATE_LIMIT_WINDOW_SECONDS;
    if (env.RUNPLANE_RATE_LIMIT_USER_REQUESTS > 0)
      this.users = new RateLimiterMemory({ points: env.RUNPLANE_RATE_LIMIT_USER_REQUESTS, duration });
    if (env.RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS > 0)
      this.services = new RateLimiterMemory({ points: env.RUNPLANE_RATE_LIMIT_SERVICE_REQUESTS, duration });
  }

  /** Counts one request; undefined when allowed, else the seconds until the principal's window ends. */
  async hit(principal: Principal): Promise<number | undefined> {
    const limiter = principal.globalRole === 'service' ? this.services : this.users;
    if (!limiter) return undefined;
    try {
      await limiter.consume(principal.userId);
      return undefined;
    } catch (refused) {
      if (!(refused instanceof RateLimiterRes)) throw refused;
      return Math.max(1, Math.ceil(refused.msBeforeNext / 1000));
    }
  }
}
