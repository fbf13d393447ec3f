import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { GlobalRole } from '../../common/auth/principal';
import { returning } from '../../infra/database/returning';
import { ApiToken } from './entities/api-token.entity';
import { User } from './entities/user.entity';

@Injectable()
export class UsersRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async findByTokenHash(tokenHash: string): Promise<User | null> {
    return this.dataSource
      .getRepository(User)
      .createQueryBuilder('u')
      .innerJoin(ApiToken, 't', 't.user_id = u.id')
      .where('t.token_hash = :tokenHash', { tokenHash })
      .getOne();
  }

  findByNames(names: string[], manager: EntityManager): Promise<User[]> {
    return manager.getRepository(User).createQueryBuilder('u').where('u.name = ANY(:names)', { names }).getMany();
  }

  findByIds(ids: string[], manager: EntityManager = this.dataSource.manager): Promise<User[]> {
    return manager.getRepository(User).createQueryBuilder('u').where('u.id = ANY(:ids)', { ids }).getMany();
  }

  async insertUser(manager: EntityManager, name: string, globalRole: GlobalRole): Promise<User> {
    const repo = manager.getRepository(User);
    return repo.save(repo.create({ name, globalRole }));
  }

  async insertToken(manager: EntityManager, userId: string, tokenHash: string): Promise<ApiToken> {
    const repo = manager.getRepository(ApiToken);
    return repo.save(repo.create({ userId, tokenHash }));
  }

  /** Serialises token issuance per user (NO KEY UPDATE: rows referencing the user can still be inserted). */
  async lockUser(manager: EntityManager, userId: string): Promise<void> {
    await manager.query('SELECT 1 FROM users WHERE id = $1 FOR NO KEY UPDATE', [userId]);
  }

  countTokens(manager: EntityManager, userId: string): Promise<number> {
    return manager.getRepository(ApiToken).countBy({ userId });
  }

  /** A user's tokens by id after `afterId` (an order that never changes, so pages never skip or repeat). */
  listTokens(userId: string, afterId: string | undefined, limit: number): Promise<ApiToken[]> {
    const qb = this.dataSource.getRepository(ApiToken).createQueryBuilder('t').where('t.user_id = :userId', { userId });
    if (afterId !== undefined) qb.andWhere('t.id > :afterId', { afterId });
    return qb.orderBy('t.id').limit(limit).getMany();
  }

  /** Deletes one of the user's tokens; its hash, or undefined when the user has no such token. */
  async deleteToken(manager: EntityManager, userId: string, tokenId: string): Promise<string | undefined> {
    const rows = await returning<{ token_hash: string }>(
      manager,
      'DELETE FROM api_tokens WHERE id = $1 AND user_id = $2 RETURNING token_hash',
      [tokenId, userId],
    );
    return rows[0]?.token_hash;
  }

  /** Deletes every token of the user; their hashes. */
  async deleteTokensOf(manager: EntityManager, userId: string): Promise<string[]> {
    const rows = await returning<{ token_hash: string }>(
      manager,
      'DELETE FROM api_tokens WHERE user_id = $1 RETURNING token_hash',
      [userId],
    );
    return rows.map((r) => r.token_hash);
  }

  async countUsers(manager: EntityManager): Promise<number> {
    return manager.getRepository(User).count();
  }

  /** Serialises first-start bootstrap across instances for the rest of the transaction. */
  async lockBootstrap(manager: EntityManager): Promise<void> {
    await manager.query('SELECT pg_advisory_xact_lock($1)', [0x72706164]);
  }
}
