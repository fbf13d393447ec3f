import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import type { GlobalRole } from '../../common/auth/principal';
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

  findByIds(ids: string[]): Promise<User[]> {
    return this.dataSource.getRepository(User).createQueryBuilder('u').where('u.id = ANY(:ids)', { ids }).getMany();
  }

  async insertUser(manager: EntityManager, name: string, globalRole: GlobalRole): Promise<User> {
    const repo = manager.getRepository(User);
    return repo.save(repo.create({ name, globalRole }));
  }

  async insertToken(manager: EntityManager, userId: string, tokenHash: string): Promise<void> {
    await manager.getRepository(ApiToken).insert({ userId, tokenHash });
  }

  async countUsers(manager: EntityManager): Promise<number> {
    return manager.getRepository(User).count();
  }

  /** Serialises first-start bootstrap across instances for the rest of the transaction. */
  async lockBootstrap(manager: EntityManager): Promise<void> {
    await manager.query('SELECT pg_advisory_xact_lock($1)', [0x72706164]);
  }
}
