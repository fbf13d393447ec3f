import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { IsJsonObject } from '../../../common/validation/validators';
import { JobRequestDto } from '../../jobs/dto/job-spec';
import { RETRY_EVENTS, type RetryEvent } from './run-status';

export const MAX_JOBS_PER_REQUEST = 10_000;
export const RUN_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export class RetryPolicyDto {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayUnique()
  @IsIn(RETRY_EVENTS, { each: true })
  on_events!: RetryEvent[];

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(30 * 24 * 3600)
  duration_s?: number;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1000)
  max_attempts?: number;
}

export class JobGroupRequestDto {
  @IsString()
  @Matches(/^[A-Za-z0-9_.:-]{1,128}$/, { message: 'must be 1-128 characters of letters, digits, _ . : -' })
  ref!: string;

  @IsOptional()
  @IsString()
  @MaxLength(128)
  parent_ref?: string;

  @IsOptional()
  @IsJsonObject(16384)
  attributes?: Record<string, unknown>;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  cancel_after_n_failures?: number;
}

export class SubmitRunDto {
  @IsOptional()
  @IsString()
  @Matches(RUN_NAME, { message: 'must be 1-63 characters of a-z, 0-9 and -, starting with a letter or digit' })
  run_name?: string;

  @ApiPropertyOptional({ description: 'Free-form JSON object, at most 16,384 characters serialised (shown in every run view).', type: 'object', additionalProperties: true })
  @IsOptional()
  @IsJsonObject(16384)
  attributes?: Record<string, unknown>;

  @IsOptional()
  @IsObject()
  @ValidateNested()
  @Type(() => RetryPolicyDto)
  retry?: RetryPolicyDto;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  cancel_after_n_failures?: number;

  /** Higher runs are claimed first (default 0). */
  @IsOptional()
  @IsInt()
  @Min(-1000)
  @Max(1000)
  priority?: number;

  @IsOptional()
  @IsArray()
  @ArrayMaxSize(1000)
  @ValidateNested({ each: true })
  @Type(() => JobGroupRequestDto)
  job_groups?: JobGroupRequestDto[];

  @ApiProperty({ description: 'Jobs: 1 to 10,000 entries, and at most 10,000 jobs once replicas are expanded.', minItems: 1, maxItems: MAX_JOBS_PER_REQUEST })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_JOBS_PER_REQUEST)
  @ValidateNested({ each: true })
  @Type(() => JobRequestDto)
  jobs!: JobRequestDto[];
}

export class StopRunDto {
  @IsOptional()
  @IsBoolean()
  abort?: boolean;
}
