import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { Transform } from 'class-transformer';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { IsJsonObject } from '../../../common/validation/validators';

export const MAX_DEPTH = 5;

export class CreateJobGroupDto {
  @IsInt()
  @Min(0)
  @Max(2_000_000_000)
  parent_id!: number;

  @IsOptional()
  @IsJsonObject(16384)
  attributes?: Record<string, unknown>;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  cancel_after_n_failures?: number;
}

export class CancelJobGroupDto {
  @IsOptional()
  @IsString()
  @MaxLength(256)
  reason?: string;
}

export class ListGroupJobsQueryDto extends PageQueryDto {
  @IsOptional()
  @Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value))
  @IsBoolean()
  recursive?: boolean;

  @ApiPropertyOptional({ description: 'Comma list of effective job statuses (at most 200 characters).', maxLength: 200 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  status?: string;
}

export interface GroupCounts {
  n_jobs: number;
  n_completed: number;
  n_succeeded: number;
  n_failed: number;
  n_cancelled: number;
}

export interface CancellationView {
  job_group_id: number;
  cancelled_at: string;
  cancelled_by: string;
  reason: string;
}

export type GroupStatus = 'running' | 'success' | 'failure' | 'cancelled';

export interface JobGroupView {
  job_group_id: number;
  parent_id: number | null;
  depth: number;
  attributes: Record<string, unknown>;
  cancel_after_n_failures: number | null;
  state: 'running' | 'complete';
  status: GroupStatus;
  cancellation: CancellationView | null;
  counts: GroupCounts;
}

/** Reasons the system itself cancels for; they show as the termination reason of the jobs they stop. */
export const SYSTEM_CANCEL_REASONS = ['stopped_by_user', 'aborted_by_user', 'fail_fast', 'budget_exceeded'] as const;

export interface Cancellation {
  jobGroupId: number;
  cancelledAt: Date;
  cancelledBy: string;
  reason: string;
}

export const toCancellationView = (c: Cancellation): CancellationView => ({
  job_group_id: c.jobGroupId,
  cancelled_at: c.cancelledAt.toISOString(),
  cancelled_by: c.cancelledBy,
  reason: c.reason,
});

/** How a job stopped by a cancellation shows: `aborted` for an abort, `terminated` otherwise. */
export function cancelledJobOutcome(c: Cancellation): { status: 'terminated' | 'aborted'; terminationReason: string } {
  if (c.reason === 'aborted_by_user') return { status: 'aborted', terminationReason: 'aborted_by_user' };
  const system = (SYSTEM_CANCEL_REASONS as readonly string[]).includes(c.reason);
  return { status: 'terminated', terminationReason: system ? c.reason : 'job_group_cancelled' };
}
