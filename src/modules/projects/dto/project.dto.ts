import { Type } from 'class-transformer';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  IsArray,
  IsIn,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  ValidateNested,
  IsObject,
} from 'class-validator';
import { IsFixedPoint } from '../../../common/validation/validators';
import { NAME_PATTERN, NAME_RULE } from '../../users/dto/user.dto';
import { PROJECT_ROLES, type ProjectRole } from '../entities/project-member.entity';

export class CreateProjectDto {
  @ApiProperty({ pattern: NAME_PATTERN.source })
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  name!: string;

  @ApiPropertyOptional({
    type: Number,
    minimum: 0,
    maximum: 1e12,
    nullable: true,
    description: 'USD, at most 6 decimals; null or absent: no limit.',
  })
  @IsOptional()
  @IsFixedPoint(6) // numeric(18, 6)
  @Min(0)
  @Max(999_999_999_999)
  billing_limit_usd?: number | null;
}

export class UpdateProjectDto {
  @ApiPropertyOptional({
    type: Number,
    minimum: 0,
    maximum: 1e12,
    nullable: true,
    description: 'USD, at most 6 decimals; null removes the limit.',
  })
  @IsOptional()
  @IsFixedPoint(6) // numeric(18, 6)
  @Min(0)
  @Max(999_999_999_999)
  billing_limit_usd?: number | null;
}

export class MemberDto {
  @ApiProperty({ pattern: NAME_PATTERN.source, description: 'A user name.' })
  @IsString()
  @Matches(NAME_PATTERN, { message: NAME_RULE })
  user!: string;

  @ApiProperty({ enum: PROJECT_ROLES })
  @IsIn(PROJECT_ROLES)
  role!: ProjectRole;
}

export class SetMembersDto {
  @ApiProperty({
    type: () => MemberDto,
    isArray: true,
    maxItems: 1000,
    description: 'The whole member list (replaces it): at most 1,000 members, at least one admin.',
  })
  @IsArray()
  @ArrayMaxSize(1000)
  // Each entry an object: an array entry would pass the nested validation (it is iterated) and reach the service.
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => MemberDto)
  members!: MemberDto[];
}

export class ProjectView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  name!: string;

  @ApiProperty({ type: Number, nullable: true })
  billing_limit_usd!: number | null;

  @ApiProperty({ format: 'date-time' })
  created_at!: string;

  @ApiProperty({ type: () => MemberDto, isArray: true })
  members!: MemberDto[];
}

/** What other modules learn about the caller's standing in a project. */
export interface ProjectAccess {
  projectId: string;
  projectName: string;
  /** null for a global admin who is not a member. */
  role: ProjectRole | null;
  billingLimitUsd: number | null;
}
