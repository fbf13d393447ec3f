import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { returning } from '../../infra/database/returning';
import { DomainError } from '../errors/domain-error';
import { IdempotencyKeyRecord } from './idempotency-key.entity';

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
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Clean-up: forgets keys older than `seconds`, at most `limit` per call. Returns how many. */
  async purgeOlderThan(seconds: number, limit: number): Promise<number> {
    const rows = await returning(
      this.dataSource.manager,
      `DELETE FROM idempotency_keys WHERE ctid IN (
         SELECT ctid FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1) LIMIT $2)
       RETURNING 1`,
      [seconds, limit],
    );
    return rows.length;
  }

  async once<T>(m: EntityManager, req: IdempotentRequest, work: () => Promise<T>): Promise<T> {
    if (!req.key) return work();
    const hash = createHash('sha256').update(`${req.scope}\n${canonical(req.request)}`).digest('hex');
    const inserted = await m
      .createQueryBuilder()
      .insert()
      .into(IdempotencyKeyRecord)
      .values({ userId: req.userId, key: req.key, scope: req.scope, requestHash: hash })
      .orIgnore()
      .returning(['key'])
      .execute();
    if (inserted.raw.length === 0) {
      const existing = await m.getRepository(IdempotencyKeyRecord).findOneByOrFail({ userId: req.userId, key: req.key });
      if (existing.requestHash !== hash) {
        throw new DomainError('IDEMPOTENCY_KEY_REUSED', 'Idempotency-Key was already used with a different request');
      }
      return existing.responseBody as T;
    }
    const response = await work();
    await m.getRepository(IdempotencyKeyRecord).update({ userId: req.userId, key: req.key }, { responseStatus: 201, responseBody: response as object });
    return response;
  }
}
