import { IsIn, IsString, Matches } from 'class-validator';
import { GLOBAL_ROLES, type GlobalRole } from '../../../common/auth/principal';
import type { User } from '../entities/user.entity';

export const NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const NAME_RULE = 'must be 1-63 characters of a-z, 0-9, _ . - starting with a letter or digit';

export class CreateUserDto {
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  name!: string;

  @IsIn(GLOBAL_ROLES)
  global_role!: GlobalRole;
}

export interface UserView {
  id: string;
  name: string;
  global_role: GlobalRole;
  created_at: string;
}

export interface UserWithToken {
  user: UserView;
  token: string;
}

/** A token as its owner sees it later: never its secret (only its hash is stored). */
export interface TokenView {
  id: string;
  created_at: string;
}

/** A new token: the secret is shown in this response only. */
export interface IssuedToken extends TokenView {
  token: string;
}

export const toUserView = (u: User): UserView => ({
  id: u.id,
  name: u.name,
  global_role: u.globalRole,
  created_at: u.createdAt.toISOString(),
});
