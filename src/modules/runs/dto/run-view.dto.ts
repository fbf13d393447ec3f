import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform, Type } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { CostBreakdownItem } from '../../billing/dto/billing.dto';
import { JobView } from '../../jobs/dto/job-spec';
import { RUN_STATUSES, type RunStatus } from './run-status';
import { RetryPolicyDto } from './submit-run.dto';

const toBool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

export class RunListQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ default: false, description: 'Oldest first (by submitted_at, then id).' })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  ascending?: boolean;

  @ApiPropertyOptional({ maxLength: 200, description: `Comma list of run statuses: ${RUN_STATUSES.join(', ')}.` })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  status?: string;

  @ApiPropertyOptional({ pattern: '^[a-z0-9][a-z0-9_.-]{0,62}$', description: 'Runs of this user only.' })
  @IsOptional()
  @IsString()
  @Matches(/^[a-z0-9][a-z0-9_.-]{0,62}$/)
  user?: string;

  @ApiPropertyOptional({ default: false, description: 'Only runs not finished.' })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  only_active?: boolean;

  @ApiPropertyOptional({ default: true })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  include_jobs?: boolean;

  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 100, default: 10, description: 'Submissions per job, newest kept.' })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(100)
  job_submissions_limit?: number;
}

export class RunGetQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 100_000, description: 'Submissions per job, newest kept; absent: all.' })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(100_000)
  job_submissions_limit?: number;
}

export class CostView {
  @ApiProperty()
  total_usd!: number;

  @ApiProperty({ type: () => CostBreakdownItem, isArray: true })
  breakdown!: CostBreakdownItem[];
}

export class RunView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty()
  run_name!: string;

  @ApiProperty({ description: 'Project name.' })
  project!: string;

  @ApiProperty({ description: 'Name of the user who submitted it.' })
  user!: string;

  @ApiProperty({ enum: RUN_STATUSES })
  status!: RunStatus;

  @ApiProperty({ type: String, nullable: true, description: 'A hint such as `retrying`.' })
  status_message!: string | null;

  @ApiProperty({ type: String, nullable: true })
  termination_reason!: string | null;

  @ApiProperty({ format: 'date-time' })
  submitted_at!: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  finished_at!: string | null;

  @ApiProperty({ type: 'integer' })
  priority!: number;

  @ApiProperty({ type: 'object', additionalProperties: true })
  attributes!: Record<string, unknown>;

  @ApiProperty({ type: () => RetryPolicyDto, nullable: true })
  retry!: { on_events: string[]; duration_s?: number; max_attempts?: number } | null;

  @ApiProperty({ type: () => CostView })
  cost!: CostView;

  @ApiProperty({ type: 'integer', enum: [0], description: 'The run is job group 0.' })
  job_group_id!: 0;

  @ApiProperty({ type: () => JobView, isArray: true })
  jobs!: JobView[];
}
