import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsNumber, IsObject, IsOptional, IsString, Matches, Max, Min, ValidateNested } from 'class-validator';
import { IsJsonObject } from '../../../common/validation/validators';

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
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(100_000)
  cpu!: number;

  @IsInt()
  @Min(0)
  @Max(1_000_000_000)
  memory_mib!: number;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1024)
  gpu?: number;
}

export class ClaimDto {
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;

  @IsObject()
  @ValidateNested()
  @Type(() => CapacityDto)
  capacity!: CapacityDto;

  @ApiPropertyOptional({ description: 'Submissions to hand out at most: default 1, at most 100 (each with its spec).', minimum: 1, maximum: 100, default: 1 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;
}

export class WorkerReportDto {
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;
}

export class RunningDto extends WorkerReportDto {
  @ApiPropertyOptional({ description: 'JSON object, at most 65,536 characters serialised.', type: 'object', additionalProperties: true })
  @IsOptional()
  @IsJsonObject(65536)
  provisioning_data?: Record<string, unknown>;
}

export class HeartbeatDto extends WorkerReportDto {
  @ApiPropertyOptional({ description: 'JSON object, at most 65,536 characters serialised.', type: 'object', additionalProperties: true })
  @IsOptional()
  @IsJsonObject(65536)
  runtime_data?: Record<string, unknown>;
}

export class CompleteDto extends WorkerReportDto {
  @IsIn(REPORTED_STATUSES)
  status!: ReportedStatus;

  @IsIn(TERMINATION_REASONS)
  termination_reason!: string;

  @IsOptional()
  @IsInt()
  @Min(-1_000_000)
  @Max(1_000_000)
  exit_status?: number;
}

export interface ClaimedSubmissionView {
  id: string;
  job_id: string;
  run_id: string;
  job_group_id: number;
  job_num: number;
  replica_num: number;
  job_name: string;
  submission_num: number;
  spec: unknown;
  lease_expires_at: string;
}

export interface CompleteView {
  submission_id: string;
  status: string;
  termination_reason: string;
  /** The submission created to retry the job, when the failure is within the run's retry policy. */
  retry_submission: { id: string; submission_num: number } | null;
}
