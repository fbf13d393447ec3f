import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { DomainError } from '../errors/domain-error';
import { IdempotencyRepository } from './idempotency.repository';

export interface IdempotentRequest {
  userId: string;
  key: string | undefined;
  /** The route the key was used on; a key reused on another route is a different request. */
  scope: string;
  request: unknown;
}

/** Stable JSON: object keys sorted, so the same body always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries.sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Exactly-once creating POSTs. Runs inside the caller's transaction: the key row is inserted first (a concurrent
 * request with the same key waits on it), the work runs, and its response is stored in the same commit.
 * Same key + same body → the stored response; same key + another body → 409 IDEMPOTENCY_KEY_REUSED.
 */
@Injectable()
export class IdempotencyService {
  constructor(private readonly keys: IdempotencyRepository) {}

  /** Clean-up: forgets keys older than `seconds`, at most `limit` per call. Returns how many. */
  purgeOlderThan(seconds: number, limit: number): Promise<number> {
    return this.keys.purgeOlderThan(seconds, limit);
  }

  async once<T>(m: EntityManager, req: IdempotentRequest, work: () => Promise<T>): Promise<T> {
    if (!req.key) return work();
    const hash = createHash('sha256').update(`${req.scope}\n${canonical(req.request)}`).digest('hex');
    if (!(await this.keys.claim(m, req.userId, req.key, req.scope, hash))) {
      const existing = await this.keys.find(m, req.userId, req.key);
      if (existing.requestHash !== hash) {
        throw new DomainError('IDEMPOTENCY_KEY_REUSED', 'Idempotency-Key was already used with a different request');
      }
      return existing.responseBody as T;
    }
    const response = await work();
    await this.keys.storeResponse(m, req.userId, req.key, 201, response);
    return response;
  }
}
