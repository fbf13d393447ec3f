import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { returning } from '../../infra/database/returning';
import { IdempotencyKeyRecord, ResourceKind } from './idempotency-key.entity';

@Injectable()
export class IdempotencyRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Claims a key; false when it exists already (a concurrent claimer waits here until the first commits). */
  async claim(m: EntityManager, userId: string, key: string, scope: string, requestHash: string): Promise<boolean> {
    const inserted = await m
      .createQueryBuilder()
      .insert()
      .into(IdempotencyKeyRecord)
      .values({ userId, key, scope, requestHash })
      .orIgnore()
      .returning(['key'])
      .execute();
    return inserted.raw.length > 0;
  }

  find(m: EntityManager, userId: string, key: string): Promise<IdempotencyKeyRecord> {
    return m.getRepository(IdempotencyKeyRecord).findOneByOrFail({ userId, key });
  }

  async storeReference(
    m: EntityManager,
    userId: string,
    key: string,
    status: number,
    kind: ResourceKind,
    id: string,
  ): Promise<void> {
    await m
      .getRepository(IdempotencyKeyRecord)
      .update({ userId, key }, { responseStatus: status, resourceKind: kind, resourceId: id });
  }

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
}
