import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { Transform } from 'class-transformer';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { IsJsonObject, Optional } from '../../../common/validation/validators';
import type { Cancellation } from '../../lifecycle/outcomes';

export const MAX_DEPTH = 5;

export class CreateJobGroupDto {
  @ApiProperty({ type: 'integer', minimum: 0, maximum: 2_000_000_000, description: 'The parent group; 0 is the run.' })
  @IsInt()
  @Min(0)
  @Max(2_000_000_000)
  parent_id!: number;

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

export class CancelJobGroupDto {
  @ApiPropertyOptional({ maxLength: 256 })
  @Optional()
  @IsString()
  @MaxLength(256)
  reason?: string;
}

export class ListGroupJobsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ default: false, description: "Also the jobs of the group's descendants." })
  @IsOptional()
  @Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value))
  @IsBoolean()
  recursive?: boolean;

  @ApiPropertyOptional({
    maxLength: 200,
    description: 'Comma list of effective job statuses (at most 200 characters).',
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  status?: string;
}

export class GroupCounts {
  @ApiProperty({ type: 'integer', minimum: 0 })
  n_jobs!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  n_completed!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  n_succeeded!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  n_failed!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  n_cancelled!: number;
}

export class GroupViewCounts extends GroupCounts {
  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description:
      'Of the jobs not completed, those waiting for their parents (`pending`). Under a cancellation they show as ' +
      'cancelled instead, but for the always_run ones it leaves to run.',
  })
  n_pending!: number;
}

export class CancellationView {
  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description: 'The group the cancellation was made on (an ancestor, for a repeat under one).',
  })
  job_group_id!: number;

  @ApiProperty({ format: 'date-time' })
  cancelled_at!: string;

  @ApiProperty({ description: 'Name of the user, or `system`.' })
  cancelled_by!: string;

  @ApiProperty()
  reason!: string;
}

export const GROUP_STATUSES = ['running', 'success', 'failure', 'cancelled'] as const;
export type GroupStatus = (typeof GROUP_STATUSES)[number];

export class JobGroupView {
  @ApiProperty({ type: 'integer', minimum: 0 })
  job_group_id!: number;

  @ApiProperty({ type: 'integer', nullable: true, description: 'null for the run (group 0).' })
  parent_id!: number | null;

  @ApiProperty({ type: 'integer', minimum: 0 })
  depth!: number;

  @ApiProperty({ type: 'object', additionalProperties: true })
  attributes!: Record<string, unknown>;

  @ApiProperty({ type: 'integer', nullable: true })
  cancel_after_n_failures!: number | null;

  @ApiProperty({ enum: ['running', 'complete'] })
  state!: 'running' | 'complete';

  @ApiProperty({ enum: GROUP_STATUSES, description: 'Precedence: failure > cancelled > success > running.' })
  status!: GroupStatus;

  @ApiProperty({ type: () => CancellationView, nullable: true })
  cancellation!: CancellationView | null;

  @ApiProperty({ type: () => GroupViewCounts, description: 'The whole subtree.' })
  counts!: GroupViewCounts;
}

export type { Cancellation } from '../../lifecycle/outcomes';

export const toCancellationView = (c: Cancellation): CancellationView => ({
  job_group_id: c.jobGroupId,
  cancelled_at: c.cancelledAt.toISOString(),
  cancelled_by: c.cancelledBy,
  reason: c.reason,
});
