import { Injectable, OnModuleInit } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { EntityManager } from 'typeorm';
import { BackgroundLoopsService } from '../../infra/loops/background-loops.service';
import { DomainError } from '../errors/domain-error';
import { ResourceKind } from './idempotency-key.entity';
import { IdempotencyRepository } from './idempotency.repository';

export interface IdempotentRequest {
  userId: string;
  key: string | undefined;
  /** The route the key was used on; a key reused on another route is a different request. */
  scope: string;
  request: unknown;
  /** What the request creates. */
  kind: ResourceKind;
}

/** How to create the object, which id to remember for it, and how to read it again for a repeat. */
export interface IdempotentWork<T> {
  create(): Promise<T>;
  idOf(created: T): string;
  /** The object as it is now (a repeat answers with the current state of the same object, as Stripe does). */
  replay(id: string): Promise<T>;
}

/** Stable JSON: object keys sorted, so the same body always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * Exactly-once creating POSTs. Runs inside the caller's transaction: the key row is inserted first (a concurrent
 * request with the same key waits on it), the work runs, and a reference to what it created is stored in the same
 * commit. Same key + same body → 201 with the current view of the same object; same key + another body → 409
 * IDEMPOTENCY_KEY_REUSED.
 */
@Injectable()
export class IdempotencyService implements OnModuleInit {
  constructor(
    private readonly keys: IdempotencyRepository,
    private readonly loops: BackgroundLoopsService,
  ) {}

  onModuleInit(): void {
    this.loops.register({ name: 'cleanup', everyMs: 60_000, pass: () => this.purgeOlderThan(24 * 3600, 1000) });
  }

  /** Clean-up: forgets keys older than `seconds`, at most `limit` per call. Returns how many. */
  purgeOlderThan(seconds: number, limit: number): Promise<number> {
    return this.keys.purgeOlderThan(seconds, limit);
  }

  async once<T>(m: EntityManager, req: IdempotentRequest, work: IdempotentWork<T>): Promise<T> {
    if (!req.key) return work.create();
    const hash = createHash('sha256')
      .update(`${req.scope}\n${canonical(req.request)}`)
      .digest('hex');
    if (!(await this.keys.claim(m, req.userId, req.key, req.scope, hash))) {
      const existing = await this.keys.find(m, req.userId, req.key);
      if (existing.requestHash !== hash || existing.resourceKind !== req.kind || existing.resourceId === null) {
        throw new DomainError('IDEMPOTENCY_KEY_REUSED', 'Idempotency-Key was already used with a different request');
      }
      return work.replay(existing.resourceId);
    }
    const created = await work.create();
    await this.keys.storeReference(m, req.userId, req.key, 201, req.kind, work.idOf(created));
    return created;
  }
}
