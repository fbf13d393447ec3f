import { ApiProperty } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { ArrayMaxSize, IsArray, IsIn, IsOptional, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { IsFixedPoint } from '../../../common/validation/validators';
import { NAME_PATTERN, NAME_RULE } from '../../users/dto/user.dto';
import { PROJECT_ROLES, type ProjectRole } from '../entities/project-member.entity';

export class CreateProjectDto {
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  name!: string;

  @IsOptional()
  @IsFixedPoint(6) // numeric(18, 6)
  @Min(0)
  @Max(999_999_999_999)
  billing_limit_usd?: number | null;
}

export class UpdateProjectDto {
  @IsOptional()
  @IsFixedPoint(6) // numeric(18, 6)
  @Min(0)
  @Max(999_999_999_999)
  billing_limit_usd?: number | null;
}

export class MemberDto {
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  user!: string;

  @IsIn(PROJECT_ROLES)
  role!: ProjectRole;
}

export class SetMembersDto {
  @ApiProperty({ description: 'The whole member list (replaces it): at most 1,000 members.', maxItems: 1000 })
  @IsArray()
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => MemberDto)
  members!: MemberDto[];
}

export interface ProjectView {
  id: string;
  name: string;
  billing_limit_usd: number | null;
  created_at: string;
  members: { user: string; role: ProjectRole }[];
}

/** What other modules learn about the caller's standing in a project. */
export interface ProjectAccess {
  projectId: string;
  projectName: string;
  /** null for a global admin who is not a member. */
  role: ProjectRole | null;
  billingLimitUsd: number | null;
}
