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
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import { IsJsonObject, Optional } from '../../../common/validation/validators';
import { JobRequestDto } from '../../jobs/dto/job-spec';
import { RETRY_EVENTS, type RetryEvent } from './run-status';

export const MAX_JOBS_PER_REQUEST = 10_000;
export const RUN_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

export class RetryPolicyDto {
  @ApiProperty({ enum: RETRY_EVENTS, isArray: true, minItems: 1, uniqueItems: true })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayUnique()
  @IsIn(RETRY_EVENTS, { each: true })
  on_events!: RetryEvent[];

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 30 * 24 * 3600,
    description: 'Retry only within this many seconds of submission.',
  })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(30 * 24 * 3600)
  duration_s?: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 1000,
    description: 'Submissions per job, the first included.',
  })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(1000)
  max_attempts?: number;
}

export class JobGroupRequestDto {
  @ApiProperty({ pattern: '^[A-Za-z0-9_.:-]{1,128}$', description: "The request's own label for the group." })
  @IsString()
  @Matches(/^[A-Za-z0-9_.:-]{1,128}$/, { message: 'must be 1-128 characters of letters, digits, _ . : -' })
  ref!: string;

  @ApiPropertyOptional({ maxLength: 128, description: 'The `ref` of another group of the request; absent: the root.' })
  @Optional()
  @IsString()
  @MaxLength(128)
  parent_ref?: string;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'At most 16,384 bytes of JSON.' })
  @Optional()
  @IsJsonObject(16384)
  attributes?: Record<string, unknown>;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000 })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  cancel_after_n_failures?: number;
}

export class SubmitRunDto {
  @ApiPropertyOptional({ pattern: RUN_NAME.source, description: 'Unique in the project; generated when absent.' })
  @Optional()
  @IsString()
  @Matches(RUN_NAME, { message: 'must be 1-63 characters of a-z, 0-9 and -, starting with a letter or digit' })
  run_name?: string;

  @ApiPropertyOptional({
    description: 'Free-form JSON object, at most 16,384 characters serialised (shown in every run view).',
    type: 'object',
    additionalProperties: true,
  })
  @Optional()
  @IsJsonObject(16384)
  attributes?: Record<string, unknown>;

  @ApiPropertyOptional({ type: () => RetryPolicyDto })
  @Optional()
  @IsObject()
  @ValidateNested()
  @Type(() => RetryPolicyDto)
  retry?: RetryPolicyDto;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 1_000_000,
    description: "Cancel the run's root group after this many failures.",
  })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  cancel_after_n_failures?: number;

  /** Higher runs are claimed first (default 0). */
  @ApiPropertyOptional({
    type: 'integer',
    minimum: -1000,
    maximum: 1000,
    default: 0,
    description: 'Higher runs are claimed first.',
  })
  @Optional()
  @IsInt()
  @Min(-1000)
  @Max(1000)
  priority?: number;

  @ApiPropertyOptional({ type: () => JobGroupRequestDto, isArray: true, maxItems: 1000 })
  @Optional()
  @IsArray()
  @ArrayMaxSize(1000)
  // Each entry an object: an array entry would pass the nested validation (it is iterated) and reach the service.
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => JobGroupRequestDto)
  job_groups?: JobGroupRequestDto[];

  @ApiProperty({
    type: () => JobRequestDto,
    isArray: true,
    description: 'Jobs: 1 to 10,000 entries, and at most 10,000 jobs once replicas are expanded.',
    minItems: 1,
    maxItems: MAX_JOBS_PER_REQUEST,
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_JOBS_PER_REQUEST)
  // Each entry an object: an array entry would pass the nested validation (it is iterated) and reach the service.
  @IsObject({ each: true })
  @ValidateNested({ each: true })
  @Type(() => JobRequestDto)
  jobs!: JobRequestDto[];
}

export class StopRunDto {
  @ApiPropertyOptional({ default: false, description: 'Abort: also stops `always_run` jobs; jobs end `aborted`.' })
  @Optional()
  @IsBoolean()
  abort?: boolean;
}
