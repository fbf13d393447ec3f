import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { ToStrictInt } from '../../../common/validation/validators';
import { MAX_RUN_VIEW_SUBMISSIONS, type JobView, type SubmissionStatus } from '../../jobs/dto/job-spec';
import type { RunStatus } from './run-status';

/** The most jobs a run view (list item or single run) carries; the rest are paged by GET .../job-groups/0/jobs. */
export const MAX_JOBS_LIMIT = 10_000;
/** Jobs per run on a list page when `jobs_limit` is omitted. */
export const DEFAULT_LIST_JOBS_LIMIT = 100;
/** Jobs of a single run view (GET one run, submit, stop) when `jobs_limit` is omitted. */
export const DEFAULT_RUN_JOBS_LIMIT = 1000;

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

  @ApiPropertyOptional({ description: 'Include jobs in each run (default true); false is jobs_limit=0.', type: Boolean })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  include_jobs?: boolean;

  @ApiPropertyOptional({
    description: `Jobs per run, the first by (job_num, replica_num); jobs_truncated tells when a run has more (every job: GET .../job-groups/0/jobs?recursive=true). 0 = job_counts only. Default ${DEFAULT_LIST_JOBS_LIMIT}, at most ${MAX_JOBS_LIMIT}.`,
    minimum: 0,
    maximum: MAX_JOBS_LIMIT,
    default: DEFAULT_LIST_JOBS_LIMIT,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(MAX_JOBS_LIMIT)
  jobs_limit?: number;

  @ApiPropertyOptional({ description: 'Newest submissions shown per job. Default 10, at most 100.', minimum: 0, maximum: 100, default: 10 })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(100)
  job_submissions_limit?: number;
}

export class RunGetQueryDto {
  @ApiPropertyOptional({
    description: `Jobs shown, the first by (job_num, replica_num); jobs_truncated tells when the run has more (every job: GET .../job-groups/0/jobs?recursive=true). 0 = job_counts only. Default ${DEFAULT_RUN_JOBS_LIMIT}, at most ${MAX_JOBS_LIMIT}.`,
    minimum: 0,
    maximum: MAX_JOBS_LIMIT,
    default: DEFAULT_RUN_JOBS_LIMIT,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(MAX_JOBS_LIMIT)
  jobs_limit?: number;

  @ApiPropertyOptional({
    description: `Newest submissions shown per job. Omitted = all, up to the newest ${MAX_RUN_VIEW_SUBMISSIONS} (the whole history: GET .../jobs/{job_id}/submissions). At most ${MAX_RUN_VIEW_SUBMISSIONS}.`,
    minimum: 0,
    maximum: MAX_RUN_VIEW_SUBMISSIONS,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(MAX_RUN_VIEW_SUBMISSIONS)
  job_submissions_limit?: number;
}

/** A run's jobs by (effective) status, as its views show them; statuses with no job are left out. */
export type JobCounts = Partial<Record<SubmissionStatus, number>>;

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
  /** Every job of the run by status (from counters, whatever `jobs_limit` shows). */
  job_counts: JobCounts;
  /** The first `jobs_limit` jobs by (job_num, replica_num). */
  jobs: JobView[];
  /** Whether the run has more jobs than `jobs` shows. */
  jobs_truncated: boolean;
}
