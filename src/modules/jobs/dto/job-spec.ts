import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
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
import type { RawJson } from '../../../common/json/raw-json';
import { IsEnvMap, IsFixedPoint } from '../../../common/validation/validators';

// The vocabulary lives in one place (the lifecycle's); re-exported here for the job views that use it.
import type { SubmissionStatus } from '../../lifecycle/vocabulary';
export { FINISHED_STATUSES, isFinished, SUBMISSION_STATUSES, type SubmissionStatus } from '../../lifecycle/vocabulary';
/** Submissions per job a run view shows when `job_submissions_limit` is omitted ("all"), and the most it accepts. */
export const MAX_RUN_VIEW_SUBMISSIONS = 1000;

export class ResourcesDto {
  @IsFixedPoint(3) // numeric(10, 3)
  @Min(0.001)
  @Max(1024)
  cpu!: number;

  @IsInt()
  @Min(1)
  @Max(16 * 1024 * 1024)
  memory_mib!: number;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(64)
  gpu?: number;
}

export class JobSpecDto {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  @MaxLength(65536, { each: true })
  commands!: string[];

  @IsOptional()
  @IsString()
  @MaxLength(512)
  image?: string;

  @IsOptional()
  @IsEnvMap()
  env?: Record<string, string>;

  @IsObject()
  @ValidateNested()
  @Type(() => ResourcesDto)
  resources!: ResourcesDto;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(30 * 24 * 3600)
  max_duration_s?: number;
}

export type JobSpec = {
  commands: string[];
  image?: string;
  env?: Record<string, string>;
  resources: { cpu: number; memory_mib: number; gpu?: number };
  max_duration_s?: number;
};

export const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export class JobRequestDto {
  @IsOptional()
  @IsString()
  @Matches(JOB_NAME, { message: 'must be 1-128 characters of letters, digits, _ . - starting with a letter or digit' })
  name?: string;

  @IsOptional()
  @IsString()
  @MaxLength(128)
  group_ref?: string;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(10000)
  replicas?: number;

  @IsOptional()
  @IsBoolean()
  always_run?: boolean;

  @IsObject()
  @ValidateNested()
  @Type(() => JobSpecDto)
  spec!: JobSpecDto;
}

/** A job to insert, already numbered and placed in a group. */
export interface NewJob {
  jobGroupId: number;
  jobNum: number;
  replicaNum: number;
  jobName: string;
  spec: JobSpec;
  alwaysRun: boolean;
}

export interface SubmissionView {
  id: string;
  submission_num: number;
  status: SubmissionStatus;
  termination_reason: string | null;
  exit_status: number | null;
  submitted_at: string;
  started_at: string | null;
  finished_at: string | null;
  provisioning_data: Record<string, unknown> | RawJson | null;
  runtime_data: Record<string, unknown> | RawJson | null;
  cost_usd: number;
}

export interface JobView {
  id: string;
  job_num: number;
  replica_num: number;
  job_name: string;
  job_group_id: number;
  status: SubmissionStatus;
  termination_reason: string | null;
  /** The group whose cancellation terminated this job, when that is why it is terminated. */
  cancelled_job_group_id: number | null;
  submission_count: number;
  folded_submissions: Record<string, number>;
  latest_job_submission: SubmissionView | null;
  job_submissions: SubmissionView[];
}
