import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { ToStrictInt } from '../../../common/validation/validators';
import { CostBreakdownItem } from '../../billing/dto/billing.dto';
import {
  JobView,
  MAX_RUN_VIEW_SUBMISSIONS,
  SUBMISSION_DATA,
  SUBMISSION_STATUSES,
  type SubmissionData,
  type SubmissionStatus,
} from '../../jobs/dto/job-spec';
import { RUN_STATUSES, type RunStatus } from './run-status';
import { RetryPolicyDto } from './submit-run.dto';

/** The most jobs a run view (list item or single run) carries; the rest are paged by GET .../job-groups/0/jobs. */
export const MAX_JOBS_LIMIT = 10_000;
/** Jobs per run on a list page when `jobs_limit` is omitted. */
export const DEFAULT_LIST_JOBS_LIMIT = 100;
/** Jobs of a single run view (GET one run, submit, stop) when `jobs_limit` is omitted. */
export const DEFAULT_RUN_JOBS_LIMIT = 1000;
/** Documents on a list page: each job's newest submission only (a page's bytes are mostly these documents). */
export const DEFAULT_LIST_SUBMISSION_DATA: SubmissionData = 'newest';
/** Documents in a single run view: every shown submission's (the detail view, as before). */
export const DEFAULT_RUN_SUBMISSION_DATA: SubmissionData = 'all';

const submissionDataDescription = (fallback: SubmissionData) =>
  "Which shown submissions carry their documents (`provisioning_data`, `runtime_data`): `newest` = each job's " +
  'newest only (older ones come without both fields), `all` = every one, `none` = no submission (statuses, times ' +
  `and costs only). Default \`${fallback}\`.`;

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

  @ApiPropertyOptional({
    description: 'Include jobs in each run (default true); false is jobs_limit=0.',
    type: Boolean,
    default: true,
  })
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  include_jobs?: boolean;

  @ApiPropertyOptional({
    type: 'integer',
    description:
      `Jobs per run, the first by (job_num, replica_num); jobs_truncated tells when a run has more ` +
      `(every job: GET .../job-groups/0/jobs?recursive=true). 0 = job_counts only. ` +
      `Default ${DEFAULT_LIST_JOBS_LIMIT}, at most ${MAX_JOBS_LIMIT}.`,
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

  @ApiPropertyOptional({
    type: 'integer',
    description: 'Newest submissions shown per job. Default 10, at most 100.',
    minimum: 0,
    maximum: 100,
    default: 10,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(100)
  job_submissions_limit?: number;

  @ApiPropertyOptional({
    enum: SUBMISSION_DATA,
    default: DEFAULT_LIST_SUBMISSION_DATA,
    description: submissionDataDescription(DEFAULT_LIST_SUBMISSION_DATA),
  })
  @IsOptional()
  @IsString()
  @IsIn(SUBMISSION_DATA)
  submission_data?: SubmissionData;
}

export class RunGetQueryDto {
  @ApiPropertyOptional({
    type: 'integer',
    description:
      `Jobs shown, the first by (job_num, replica_num); jobs_truncated tells when the run has more ` +
      `(every job: GET .../job-groups/0/jobs?recursive=true). 0 = job_counts only. ` +
      `Default ${DEFAULT_RUN_JOBS_LIMIT}, at most ${MAX_JOBS_LIMIT}.`,
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
    description:
      `Newest submissions shown per job. Omitted = all, up to the newest ${MAX_RUN_VIEW_SUBMISSIONS} ` +
      `(the whole history: GET .../jobs/{job_id}/submissions). At most ${MAX_RUN_VIEW_SUBMISSIONS}.`,
    minimum: 0,
    maximum: MAX_RUN_VIEW_SUBMISSIONS,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(0)
  @Max(MAX_RUN_VIEW_SUBMISSIONS)
  job_submissions_limit?: number;

  @ApiPropertyOptional({
    enum: SUBMISSION_DATA,
    default: DEFAULT_RUN_SUBMISSION_DATA,
    description: submissionDataDescription(DEFAULT_RUN_SUBMISSION_DATA),
  })
  @IsOptional()
  @IsString()
  @IsIn(SUBMISSION_DATA)
  submission_data?: SubmissionData;
}

/** A run's jobs by (effective) status, as its views show them; statuses with no job are left out. */
export type JobCounts = Partial<Record<SubmissionStatus, number>>;

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

  /** Every job of the run by status (from counters, whatever `jobs_limit` shows). */
  @ApiProperty({
    type: 'object',
    properties: Object.fromEntries(SUBMISSION_STATUSES.map((s) => [s, { type: 'integer', minimum: 1 }])),
    additionalProperties: false,
    description: 'Every job of the run by status, whatever `jobs_limit` shows; statuses with no job are left out.',
  })
  job_counts!: JobCounts;

  /** The first `jobs_limit` jobs by (job_num, replica_num). */
  @ApiProperty({
    type: () => JobView,
    isArray: true,
    description: 'The first `jobs_limit` jobs by (job_num, replica_num).',
  })
  jobs!: JobView[];

  /** Whether the run has more jobs than `jobs` shows. */
  @ApiProperty({ description: 'Whether the run has more jobs than `jobs` shows.' })
  jobs_truncated!: boolean;
}
