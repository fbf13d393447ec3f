import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { ToStrictInt } from '../../../common/validation/validators';
import type { JobView } from '../../jobs/dto/job-spec';
import type { RunStatus } from './run-status';

const toBool = ({ value }: { value: unknown }) => (value === 'true' ? true : value === 'false' ? false : value);

export class RunListQueryDto extends PageQueryDto {
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  ascending?: boolean;

  @IsOptional()
  @IsString()
  @MaxLength(200)
  status?: string;

  @IsOptional()
  @IsString()
  @Matches(/^[a-z0-9][a-z0-9_.-]{0,62}$/)
  user?: string;

  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  only_active?: boolean;

  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  include_jobs?: boolean;

  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(100)
  job_submissions_limit?: number;
}

export class RunGetQueryDto {
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(100_000)
  job_submissions_limit?: number;
}

export interface CostView {
  total_usd: number;
  breakdown: { resource: string; usage: number; unit: string; cost_usd: number }[];
}

export interface RunView {
  id: string;
  run_name: string;
  project: string;
  user: string;
  status: RunStatus;
  status_message: string | null;
  termination_reason: string | null;
  submitted_at: string;
  finished_at: string | null;
  priority: number;
  attributes: Record<string, unknown>;
  retry: { on_events: string[]; duration_s?: number; max_attempts?: number } | null;
  cost: CostView;
  job_group_id: 0;
  jobs: JobView[];
}
