import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsNumber, IsObject, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { IsJsonObject, Optional } from '../../../common/validation/validators';
import { JobSpecDto, SUBMISSION_STATUSES, type SubmissionStatus } from '../../jobs/dto/job-spec';

const WORKER_ID = /^[A-Za-z0-9_.:@-]{1,128}$/;
const WORKER_ID_RULE = 'must be 1-128 characters of letters, digits, _ . : @ -';

export const TERMINATION_REASONS = [
  'failed_to_start_due_to_no_capacity',
  'interrupted_by_no_capacity',
  'instance_unreachable',
  'container_exited_with_error',
  'executor_error',
  'max_duration_exceeded',
  'done_by_runner',
  'stopped_by_user',
  'aborted_by_user',
  'job_group_cancelled',
  'fail_fast',
  'budget_exceeded',
] as const;

export const REPORTED_STATUSES = ['done', 'failed', 'terminated', 'aborted'] as const;
export type ReportedStatus = (typeof REPORTED_STATUSES)[number];

export class CapacityDto {
  @ApiProperty({ minimum: 0, maximum: 100_000 })
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(100_000)
  cpu!: number;

  @ApiProperty({ type: 'integer', minimum: 0, maximum: 1_000_000_000 })
  @IsInt()
  @Min(0)
  @Max(1_000_000_000)
  memory_mib!: number;

  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 1024 })
  @Optional()
  @IsInt()
  @Min(0)
  @Max(1024)
  gpu?: number;
}

const WorkerIdProperty = () => ApiProperty({ pattern: WORKER_ID.source });

export class ClaimDto {
  @WorkerIdProperty()
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;

  @ApiProperty({ type: () => CapacityDto })
  @IsObject()
  @ValidateNested()
  @Type(() => CapacityDto)
  capacity!: CapacityDto;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 1 })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class WorkerReportDto {
  @WorkerIdProperty()
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;
}

export class RunningDto extends WorkerReportDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'At most 65,536 bytes of JSON.' })
  @Optional()
  @IsJsonObject(65536)
  provisioning_data?: Record<string, unknown>;
}

export class HeartbeatDto extends WorkerReportDto {
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: 'At most 65,536 bytes of JSON.' })
  @Optional()
  @IsJsonObject(65536)
  runtime_data?: Record<string, unknown>;
}

export class CompleteDto extends WorkerReportDto {
  @ApiProperty({ enum: REPORTED_STATUSES })
  @IsIn(REPORTED_STATUSES)
  status!: ReportedStatus;

  @ApiProperty({ enum: TERMINATION_REASONS })
  @IsIn(TERMINATION_REASONS)
  termination_reason!: string;

  @ApiPropertyOptional({ type: 'integer', minimum: -1_000_000, maximum: 1_000_000 })
  @Optional()
  @IsInt()
  @Min(-1_000_000)
  @Max(1_000_000)
  exit_status?: number;
}

export class ClaimedSubmissionView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ format: 'uuid' })
  job_id!: string;

  @ApiProperty({ format: 'uuid' })
  run_id!: string;

  @ApiProperty({ type: 'integer', minimum: 0 })
  job_group_id!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  job_num!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  replica_num!: number;

  @ApiProperty()
  job_name!: string;

  @ApiProperty({ type: 'integer', minimum: 0 })
  submission_num!: number;

  @ApiProperty({ type: () => JobSpecDto })
  spec!: unknown;

  @ApiProperty({ format: 'date-time' })
  lease_expires_at!: string;
}

export class ClaimView {
  @ApiProperty({ type: () => ClaimedSubmissionView, isArray: true })
  submissions!: ClaimedSubmissionView[];
}

export class RunningView {
  @ApiProperty({ enum: ['running'] })
  status!: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  lease_expires_at!: string | null;
}

export class HeartbeatView {
  @ApiProperty({ description: "The submission's group, an ancestor or the run was cancelled: stop the work." })
  cancel_requested!: boolean;

  @ApiProperty({ format: 'date-time' })
  lease_expires_at!: string;
}

export class RetrySubmissionView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ type: 'integer', minimum: 1 })
  submission_num!: number;
}

export class CompleteView {
  @ApiProperty({ format: 'uuid' })
  submission_id!: string;

  @ApiProperty({ enum: SUBMISSION_STATUSES })
  status!: SubmissionStatus | string;

  @ApiProperty()
  termination_reason!: string;

  /** The submission created to retry the job, when the failure is within the run's retry policy. */
  @ApiProperty({ type: () => RetrySubmissionView, nullable: true, description: 'The submission created to retry the job, when the failure is within the retry policy.' })
  retry_submission!: { id: string; submission_num: number } | null;
}
