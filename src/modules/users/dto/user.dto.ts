import { ApiProperty } from '@nestjs/swagger';
import { IsIn, IsString, Matches } from 'class-validator';
import { GLOBAL_ROLES, type GlobalRole } from '../../../common/auth/principal';
import type { User } from '../entities/user.entity';

export const NAME_PATTERN = /^[a-z0-9][a-z0-9_.-]{0,62}$/;
export const NAME_RULE = 'must be 1-63 characters of a-z, 0-9, _ . - starting with a letter or digit';

export class CreateUserDto {
  @ApiProperty({ pattern: NAME_PATTERN.source })
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  name!: string;

  @ApiProperty({ enum: GLOBAL_ROLES, description: '`service` accounts may call only the internal worker API.' })
  @IsIn(GLOBAL_ROLES)
  global_role!: GlobalRole;
}

export class UserView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  name!: string;

  @ApiProperty({ enum: GLOBAL_ROLES })
  global_role!: GlobalRole;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

export class UserWithToken {
  @ApiProperty({ type: () => UserView })
  user!: UserView;

  @ApiProperty({ description: 'Shown only in this response.' })
  token!: string;
}

/** A token as its owner sees it later: never its secret (only its hash is stored). */
export class TokenView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;
}

/** A new token: the secret is shown in this response only. */
export class IssuedToken extends TokenView {
  @ApiProperty({ description: 'The secret, shown only in this response.' })
  token!: string;
}

export const toUserView = (u: User): UserView => ({
  id: u.id,
  name: u.name,
  global_role: u.globalRole,
  created_at: u.createdAt.toISOString(),
});
