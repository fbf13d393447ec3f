import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { createHash, randomBytes } from 'node:crypto';
import { DataSource, EntityManager } from 'typeorm';
import type { GlobalRole, Principal } from '../../common/auth/principal';
import { DomainError, notFound } from '../../common/errors/domain-error';
import { decodeCursor, Page, toPage } from '../../common/pagination/cursor';
import { Env } from '../../config/env';
import { retryReadOnce } from '../../infra/database/read-retry';
import { IssuedToken, TokenView, UserView, UserWithToken, toUserView } from './dto/user.dto';
import { UsersRepository } from './users.repository';

export const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');
/**
 * A revoked token is dropped from this instance's cache at once; other instances may accept it for up to this long.
 */
const TOKEN_CACHE_MS = 10_000;
const TOKEN_CACHE_SIZE = 10_000;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const newToken = () => `rp_${randomBytes(32).toString('base64url')}`;

@Injectable()
export class UsersService {
  private readonly logger = new Logger(UsersService.name);
  private readonly recent = new Map<string, { principal: Principal; until: number }>();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly users: UsersRepository,
    private readonly env: Env,
  ) {}

  /**
   * The principal behind a token. Known tokens are remembered for a few seconds (workers send many requests a
   * second); unknown ones are always looked up, so a new token works at once.
   */
  async authenticate(token: string): Promise<Principal | null> {
    const hash = hashToken(token);
    const cached = this.recent.get(hash);
    if (cached && cached.until > Date.now()) return cached.principal;
    // The guard runs before the read-retry interceptor: a lost connection gets its one retry here.
    const user = await retryReadOnce(() => this.users.findByTokenHash(hash));
    if (!user) return null;
    const principal: Principal = { userId: user.id, name: user.name, globalRole: user.globalRole };
    if (this.recent.size >= TOKEN_CACHE_SIZE) this.recent.clear();
    this.recent.set(hash, { principal, until: Date.now() + TOKEN_CACHE_MS });
    return principal;
  }

  createUser(name: string, globalRole: GlobalRole): Promise<UserWithToken> {
    return this.dataSource.transaction(async (m) => this.insertWithToken(m, name, globalRole, newToken()));
  }

  /**
   * A new token for the caller, refused past RUNPLANE_MAX_TOKENS_PER_USER live ones (counted under the user's lock).
   */
  async issueToken(principal: Principal): Promise<IssuedToken> {
    const token = newToken();
    const max = this.env.RUNPLANE_MAX_TOKENS_PER_USER;
    const row = await this.dataSource.transaction(async (m) => {
      await this.users.lockUser(m, principal.userId);
      const live = await this.users.countTokens(m, principal.userId);
      if (live >= max) {
        throw new DomainError(
          'TOKEN_LIMIT_REACHED',
          `${principal.name} has ${live} tokens, the most allowed is ${max}: revoke unused ones with DELETE ` +
            `/api/v1/users/me/tokens/{id} (GET /api/v1/users/me/tokens lists them)`,
        );
      }
      return this.users.insertToken(m, principal.userId, hashToken(token));
    });
    return { id: row.id, created_at: row.createdAt.toISOString(), token };
  }

  async listTokens(principal: Principal, limit: number, cursor?: string): Promise<Page<TokenView>> {
    const after = cursor ? (decodeCursor(cursor, ['string'])[0] as string) : undefined;
    if (after !== undefined && !UUID.test(after)) {
      throw new DomainError('INVALID_CURSOR', 'cursor is not a cursor of this list', [
        { field: 'cursor', message: 'is invalid' },
      ]);
    }
    const rows = await this.users.listTokens(principal.userId, after, limit + 1);
    return toPage(
      rows,
      limit,
      (t) => [t.id],
      (t) => ({ id: t.id, created_at: t.createdAt.toISOString() }),
    );
  }

  /**
   * Revokes one of the caller's tokens (the one in use included); another user's token is a 404, like a missing one.
   */
  async revokeToken(principal: Principal, tokenId: string): Promise<void> {
    if (!UUID.test(tokenId)) throw notFound(`token ${tokenId}`);
    const hash = await this.dataSource.transaction((m) => this.users.deleteToken(m, principal.userId, tokenId));
    if (!hash) throw notFound(`token ${tokenId}`);
    this.recent.delete(hash);
  }

  async me(principal: Principal): Promise<UserView> {
    const [user] = await this.users.findByIds([principal.userId]);
    return toUserView(user);
  }

  /** Users by name, for membership edits; unknown names are returned so the caller can name them in its error. */
  async resolveNames(
    names: string[],
    manager: EntityManager,
  ): Promise<{ found: Map<string, string>; missing: string[] }> {
    const users = await this.users.findByNames(names, manager);
    const found = new Map(users.map((u) => [u.name, u.id]));
    return { found, missing: names.filter((n) => !found.has(n)) };
  }

  async idsByNames(names: string[]): Promise<Map<string, string>> {
    return new Map((await this.users.findByNames(names, this.dataSource.manager)).map((u) => [u.name, u.id]));
  }

  async namesByIds(ids: string[], manager?: EntityManager): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    return new Map((await this.users.findByIds([...new Set(ids)], manager)).map((u) => [u.id, u.name]));
  }

  /**
   * A new token for the service account `name` (created if missing), every earlier token of it revoked: what the
   * server's embedded worker gets at each start (the secret lives only in that process's memory). A user of that
   * name that is not a service account is an error.
   */
  async renewServiceToken(name: string): Promise<string> {
    const token = newToken();
    const revoked = await this.dataSource.transaction(async (m) => {
      // Serialises instances starting together, as the first admin's creation does.
      await this.users.lockBootstrap(m);
      let [user] = await this.users.findByNames([name], m);
      if (user && user.globalRole !== 'service')
        throw new Error(`the user ${name} exists and is not a service account: it can't be the embedded worker's`);
      user ??= await this.users.insertUser(m, name, 'service');
      const hashes = await this.users.deleteTokensOf(m, user.id);
      await this.users.insertToken(m, user.id, hashToken(token));
      return hashes;
    });
    for (const hash of revoked) this.recent.delete(hash);
    return token;
  }

  /**
   * On an empty database, creates the first admin. Its token is RUNPLANE_ADMIN_TOKEN when set (automated
   * deployments), else random and printed once. Returns the new admin, or null when users already exist.
   */
  async bootstrapAdmin(presetToken?: string): Promise<UserWithToken | null> {
    return this.dataSource.transaction(async (m) => {
      await this.users.lockBootstrap(m);
      if ((await this.users.countUsers(m)) > 0) return null;
      return this.insertWithToken(m, 'admin', 'admin', presetToken ?? newToken());
    });
  }

  private async insertWithToken(
    m: EntityManager,
    name: string,
    role: GlobalRole,
    token: string,
  ): Promise<UserWithToken> {
    const user = await this.users.insertUser(m, name, role);
    await this.users.insertToken(m, user.id, hashToken(token));
    this.logger.log({ user: name, role }, 'user created');
    return { user: toUserView(user), token };
  }
}
