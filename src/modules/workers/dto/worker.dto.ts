import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsIn,
  IsInt,
  IsNumber,
  IsObject,
  IsString,
  IsUUID,
  Matches,
  Max,
  Min,
  registerDecorator,
  ValidateNested,
  ValidationArguments,
} from 'class-validator';
import { IsJsonObject, Optional } from '../../../common/validation/validators';
import { JobSpecDto, SUBMISSION_STATUSES, type SubmissionStatus } from '../../jobs/dto/job-spec';
import {
  FINISHED_STATUSES,
  type FinishedStatus,
  isWorkerReportable,
  type TerminationReason,
  WORKER_REPORTABLE,
  WORKER_REPORTABLE_REASONS,
} from '../../lifecycle/vocabulary';

export const WORKER_ID = /^[A-Za-z0-9_.:@-]{1,128}$/;
export const WORKER_ID_RULE = 'must be 1-128 characters of letters, digits, _ . : @ -';
const CONTAINER_RUNTIME = /^[a-z0-9][a-z0-9._-]{0,63}$/;
/** Submissions one batched heartbeat may name. */
export const MAX_HEARTBEAT_SUBMISSIONS = 1000;

/** The final statuses a worker may report, and for each the reasons it may carry (from the lifecycle's table). */
export const REPORTED_STATUSES = FINISHED_STATUSES;
export type ReportedStatus = FinishedStatus;

const PAIRS_TEXT = REPORTED_STATUSES.map(
  (s) => `\`${s}\`: ${WORKER_REPORTABLE[s].map((r) => `\`${r}\``).join(', ')}`,
).join('; ');

/** `termination_reason` must be one the table allows with the body's `status` (checked once `status` is valid). */
function IsReasonOfStatus(): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isReasonOfStatus',
      target: target.constructor,
      propertyName: propertyName as string,
      validator: {
        validate: (value: unknown, args: ValidationArguments) => {
          const status = (args.object as { status?: unknown }).status;
          // An invalid status is reported on its own field; the reason is then judged against every status.
          if (typeof status !== 'string' || !(REPORTED_STATUSES as readonly string[]).includes(status))
            return (WORKER_REPORTABLE_REASONS as readonly unknown[]).includes(value);
          return typeof value === 'string' && isWorkerReportable(status, value);
        },
        defaultMessage: (args?: ValidationArguments) => {
          const status = (args?.object as { status?: unknown } | undefined)?.status;
          return typeof status === 'string' && (REPORTED_STATUSES as readonly string[]).includes(status)
            ? `must be one of ${WORKER_REPORTABLE[status as ReportedStatus].join(', ')} when status is ${status}`
            : `must be one of ${WORKER_REPORTABLE_REASONS.join(', ')}`;
        },
      },
    });
}

export class CapacityDto {
  @ApiProperty({
    type: 'number',
    minimum: 0,
    maximum: 100_000,
    description: 'CPUs free on this worker (fractions allowed).',
  })
  @IsNumber({ allowNaN: false, allowInfinity: false })
  @Min(0)
  @Max(100_000)
  cpu!: number;

  @ApiProperty({ type: 'integer', minimum: 0, maximum: 1_000_000_000, description: 'Memory free on this worker, MiB.' })
  @IsInt()
  @Min(0)
  @Max(1_000_000_000)
  memory_mib!: number;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: 1024,
    default: 0,
    description: 'GPUs free on this worker.',
  })
  @Optional()
  @IsInt()
  @Min(0)
  @Max(1024)
  gpu?: number;
}

export class WorkerCapabilitiesDto {
  @ApiPropertyOptional({
    pattern: CONTAINER_RUNTIME.source,
    example: 'docker',
    description:
      'The container runtime this worker runs images with (e.g. `docker`, `podman`). Jobs whose spec has an `image` ' +
      'are handed only to workers that declare one; without it, only jobs without an image.',
  })
  @Optional()
  @IsString()
  @Matches(CONTAINER_RUNTIME, { message: 'must be 1-64 characters of lower-case letters, digits, . _ -' })
  container_runtime?: string;
}

export const WORKER_ID_DOC = {
  pattern: WORKER_ID.source,
  description:
    'The worker process, chosen by the worker. A claimed submission is held by this id together with the service ' +
    'account that claimed it: reports must come from both ' +
    '(another account gets 404, another worker of the same account 409).',
};

export class ClaimDto {
  @ApiProperty(WORKER_ID_DOC)
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;

  @ApiProperty({
    type: () => CapacityDto,
    description: 'Only submissions whose resources fit in this capacity (all together) are handed out.',
  })
  @IsObject()
  @ValidateNested()
  @Type(() => CapacityDto)
  capacity!: CapacityDto;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: 1,
    maximum: 100,
    default: 1,
    description: 'Submissions to hand out at most: default 1, at most 100 (each with its spec).',
  })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(100)
  limit?: number;

  @ApiPropertyOptional({
    type: () => WorkerCapabilitiesDto,
    description: 'What the worker can run beyond plain processes. Absent: no container runtime.',
  })
  @Optional()
  @IsObject()
  @ValidateNested()
  @Type(() => WorkerCapabilitiesDto)
  capabilities?: WorkerCapabilitiesDto;
}

export class WorkerReportDto {
  @ApiProperty(WORKER_ID_DOC)
  @IsString()
  @Matches(WORKER_ID, { message: WORKER_ID_RULE })
  worker_id!: string;
}

export class RunningDto extends WorkerReportDto {
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'Any JSON object up to 64 KiB, stored and shown as sent.',
  })
  @Optional()
  @IsJsonObject(65536)
  provisioning_data?: Record<string, unknown>;
}

export class HeartbeatDto extends WorkerReportDto {
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: 'Any JSON object up to 64 KiB, stored and shown as sent.',
  })
  @Optional()
  @IsJsonObject(65536)
  runtime_data?: Record<string, unknown>;
}

export class CompleteDto extends WorkerReportDto {
  @ApiProperty({
    enum: REPORTED_STATUSES,
    description: 'The final status. `done` only after the submission reported `running`.',
  })
  @IsIn(REPORTED_STATUSES)
  status!: ReportedStatus;

  @ApiProperty({
    enum: WORKER_REPORTABLE_REASONS,
    description:
      `Must go with \`status\` (${PAIRS_TEXT}); anything else is a 400 naming this field. ` +
      'A submission that never reported `running` can only end as `failed` ' +
      '(failed_to_start_due_to_no_capacity, executor_error, instance_unreachable), ' +
      '`terminated` (a cancellation reason) or `aborted`; another outcome is a 409 `TRANSITION_NOT_ALLOWED`.',
  })
  @IsReasonOfStatus()
  termination_reason!: TerminationReason;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: -1_000_000,
    maximum: 1_000_000,
    description: "The process's exit status, if it ran.",
  })
  @Optional()
  @IsInt()
  @Min(-1_000_000)
  @Max(1_000_000)
  exit_status?: number;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description:
      'What the worker measured (e.g. exit_status, wall_s, cpu_s, peak_memory_mib): any JSON object up to 64 KiB, ' +
      'stored as sent (replacing what heartbeats sent) when the report is accepted.',
  })
  @Optional()
  @IsJsonObject(65536)
  runtime_data?: Record<string, unknown>;
}

export class HeartbeatBatchDto {
  @ApiProperty({
    type: 'string',
    format: 'uuid',
    isArray: true,
    minItems: 1,
    maxItems: MAX_HEARTBEAT_SUBMISSIONS,
    description: `The submissions this worker runs (at most ${MAX_HEARTBEAT_SUBMISSIONS}).`,
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_HEARTBEAT_SUBMISSIONS)
  @IsUUID('all', { each: true, message: 'each must be a submission id (a UUID)' })
  submissions!: string[];
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

  @ApiProperty({ description: "The run's name (RUNPLANE_RUN_NAME of the job's process)." })
  run_name!: string;

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

export class HeartbeatBatchItemView {
  @ApiProperty({ format: 'uuid' })
  submission_id!: string;

  @ApiProperty({
    description:
      'Whether this worker still holds the submission (claimed by it and this account, not finished). When false ' +
      "(finished, e.g. by a lapsed lease or the time limit; another worker's; unknown), stop the process and " +
      'report nothing for it.',
  })
  held!: boolean;

  @ApiProperty({ description: "The submission's group, an ancestor or the run was cancelled: stop the work." })
  cancel_requested!: boolean;

  @ApiProperty({
    type: String,
    enum: ['terminated', 'aborted'],
    nullable: true,
    description: 'With `cancel_requested`: the status to report with `reason` once the process is stopped.',
  })
  status!: 'terminated' | 'aborted' | null;

  @ApiProperty({
    type: String,
    enum: WORKER_REPORTABLE_REASONS,
    nullable: true,
    description: 'With `cancel_requested`: the termination reason to report (what the cancellation says).',
  })
  reason!: TerminationReason | null;

  @ApiProperty({
    type: String,
    format: 'date-time',
    nullable: true,
    description: 'The renewed lease; null if not held.',
  })
  lease_expires_at!: string | null;
}

export class HeartbeatBatchView {
  @ApiProperty({
    type: () => HeartbeatBatchItemView,
    isArray: true,
    description: 'One answer per submission named, in the request order.',
  })
  submissions!: HeartbeatBatchItemView[];
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
  @ApiProperty({
    type: () => RetrySubmissionView,
    nullable: true,
    description: 'The submission created to retry the job, when the failure is within the retry policy.',
  })
  retry_submission!: { id: string; submission_num: number } | null;
}
