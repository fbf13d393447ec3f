import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  IsArray,
  IsBoolean,
  IsInt,
  IsObject,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  ValidateNested,
} from 'class-validator';
import type { RawJson } from '../../../common/json/raw-json';
import { IsEnvMap, Optional } from '../../../common/validation/validators';

// The vocabulary lives in one place (the lifecycle's); re-exported here for the job views that use it.
import { SUBMISSION_STATUSES, type SubmissionStatus } from '../../lifecycle/vocabulary';
export { FINISHED_STATUSES, isFinished, SUBMISSION_STATUSES, type SubmissionStatus } from '../../lifecycle/vocabulary';
/** Submissions per job a run view shows when `job_submissions_limit` is omitted ("all"), and the most it accepts. */
export const MAX_RUN_VIEW_SUBMISSIONS = 1000;

/**
 * Which shown submissions of a run view carry their documents (`provisioning_data`, `runtime_data`, a few KB each):
 * only each job's newest, every one, or none. A submission shown without them leaves both fields out.
 */
export const SUBMISSION_DATA = ['newest', 'all', 'none'] as const;
export type SubmissionData = (typeof SUBMISSION_DATA)[number];

/**
 * Requested resources, key → quantity. The keys a spec may carry, their bounds and how each is billed are rows of
 * requestable_resources (filled by migrations), checked on submit and add-jobs against that table, not here: the DTO
 * only takes an object. cpu and memory_mib also fill the submission's scheduling columns (claim capacity fitting).
 */
export type RequestedResources = { cpu: number; memory_mib: number; gpu?: number } & Record<string, number>;

/** What the OpenAPI document says about `resources`: the keys as this version's migrations define them. */
export const RESOURCES_DESCRIPTION =
  "Requested quantities by key. The keys a spec may carry are the rows of the server's requestable_resources " +
  'table, filled by migrations; an unknown key is a 400 naming it (`jobs[i].spec.resources.<key>`). As of this ' +
  'version: `cpu` (required; cores, 0.001 to 1024, at most 3 decimals), `memory_mib` (required; MiB, integer, 1 ' +
  'to 16,777,216; billed as `memory` in GiB), `gpu` (integer, 0 to 64), `disk_gib` (GiB, 0 to 1,048,576, at most 3 ' +
  'decimals; billed as `disk`). Keys a later migration adds are optional. Each requested key with a quantity above ' +
  "0 is billed at its resource's current rate (`GET /api/v1/resources`) from the moment the submission runs; a " +
  'key whose resource has no rate yet is refused (400) unless its quantity is 0.';

export class JobSpecDto {
  @ApiProperty({
    type: String,
    isArray: true,
    minItems: 1,
    maxItems: 1000,
    description: 'Run in order in one shell; each at most 65,536 characters.',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(1000)
  @IsString({ each: true })
  @MaxLength(65536, { each: true })
  commands!: string[];

  @ApiPropertyOptional({ maxLength: 512 })
  @Optional()
  @IsString()
  @MaxLength(512)
  image?: string;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'string', maxLength: 32768 },
    maxProperties: 500,
    description: 'Names like FOO_BAR (letters, digits, _; not starting with a digit; at most 256) to strings.',
  })
  @Optional()
  @IsEnvMap()
  env?: Record<string, string>;

  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'number', minimum: 0 },
    description: RESOURCES_DESCRIPTION,
  })
  @IsObject()
  resources!: RequestedResources;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 30 * 24 * 3600 })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(30 * 24 * 3600)
  max_duration_s?: number;
}

export type JobSpec = {
  commands: string[];
  image?: string;
  env?: Record<string, string>;
  resources: RequestedResources;
  max_duration_s?: number;
};

/** Parents one job may have, and dependency edges (replicas expanded) one request may add. */
export const MAX_PARENTS_PER_JOB = 1000;
export const MAX_EDGES_PER_REQUEST = 100_000;

export const JOB_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export class JobRequestDto {
  @ApiPropertyOptional({ pattern: JOB_NAME.source })
  @Optional()
  @IsString()
  @Matches(JOB_NAME, { message: 'must be 1-128 characters of letters, digits, _ . - starting with a letter or digit' })
  name?: string;

  @ApiPropertyOptional({
    maxLength: 128,
    description: 'The `ref` of a group of the same request (run submission only); absent: the root.',
  })
  @Optional()
  @IsString()
  @MaxLength(128)
  group_ref?: string;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 10000, default: 1 })
  @Optional()
  @IsInt()
  @Min(1)
  @Max(10000)
  replicas?: number;

  @ApiPropertyOptional({
    default: false,
    description:
      'Runs once its parents have finished whatever their outcome, and is not stopped by the cancellation of its ' +
      'group or an ancestor; only a stop with `abort: true` stops it.',
  })
  @Optional()
  @IsBoolean()
  always_run?: boolean;

  @ApiPropertyOptional({
    maxLength: 128,
    description:
      'A label unique within this request, for `depends_on` of other jobs of the same request; with `replicas` > 1 ' +
      'it stands for every replica.',
  })
  @Optional()
  @IsString()
  @MaxLength(128)
  ref?: string;

  @ApiPropertyOptional({
    type: String,
    isArray: true,
    maxItems: MAX_PARENTS_PER_JOB,
    description:
      'Parents: each a `ref` of this request or the id of a job already in the same run (any group). The job is ' +
      '`pending` until every parent has finished; a parent that ends other than `done` ends it as ' +
      '`terminated`/`dependency_failed` unless it is `always_run`. At most 1,000 parents per job and 100,000 edges ' +
      "per request (replicas expanded); a cycle, an unknown parent, the job itself or another run's job is a 400 " +
      '`DEPENDENCY_INVALID` naming the job.',
  })
  @Optional()
  @IsArray()
  @IsString({ each: true })
  @MaxLength(128, { each: true })
  depends_on?: string[];

  @ApiProperty({ type: () => JobSpecDto })
  @IsObject()
  @ValidateNested()
  @Type(() => JobSpecDto)
  spec!: JobSpecDto;
}

/** A job to insert, already numbered and placed in a group. */
export interface NewJob {
  id: string;
  jobGroupId: number;
  jobNum: number;
  replicaNum: number;
  jobName: string;
  spec: JobSpec;
  alwaysRun: boolean;
  /** Where it starts (default `submitted`): `pending` with unfinished parents, or ended by a failed parent. */
  status?: SubmissionStatus;
  terminationReason?: string | null;
  nPendingParents?: number;
  nParents?: number;
}

const FREE_FORM = { type: 'object', additionalProperties: true, nullable: true } as const;

const DOCUMENTS_LEFT_OUT =
  'Left out (absent, not null) where a view does not send it: in job views, from `latest_job_submission` when ' +
  '`job_submissions` is not empty (its last item is that same submission, in full), and in run views from the ' +
  "submissions `submission_data` does not ask for (the runs list sends only each job's newest by default). Always " +
  'present in the submission history (`GET .../jobs/{job_id}/submissions`).';

export class SubmissionView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ type: 'integer', minimum: 0 })
  submission_num!: number;

  @ApiProperty({ enum: SUBMISSION_STATUSES })
  status!: SubmissionStatus;

  @ApiProperty({ type: String, nullable: true })
  termination_reason!: string | null;

  @ApiProperty({ type: 'integer', nullable: true })
  exit_status!: number | null;

  @ApiProperty({ format: 'date-time' })
  submitted_at!: string;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  started_at!: string | null;

  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  finished_at!: string | null;

  @ApiPropertyOptional({
    ...FREE_FORM,
    description: `What the worker reported when it started (null: nothing yet). ${DOCUMENTS_LEFT_OUT}`,
  })
  provisioning_data?: Record<string, unknown> | RawJson | null;

  @ApiPropertyOptional({
    ...FREE_FORM,
    description: `What the worker reported on heartbeats and on completion (null: nothing yet). ${DOCUMENTS_LEFT_OUT}`,
  })
  runtime_data?: Record<string, unknown> | RawJson | null;

  @ApiProperty()
  cost_usd!: number;
}

export class JobView {
  @ApiProperty({ format: 'uuid' })
  id!: string;

  @ApiProperty({ type: 'integer', minimum: 0 })
  job_num!: number;

  @ApiProperty({ type: 'integer', minimum: 0 })
  replica_num!: number;

  @ApiProperty()
  job_name!: string;

  @ApiProperty({ type: 'integer', minimum: 0 })
  job_group_id!: number;

  @ApiProperty({
    enum: SUBMISSION_STATUSES,
    description: 'Effective: `terminated` once an ancestor group is cancelled.',
  })
  status!: SubmissionStatus;

  @ApiProperty({ type: String, nullable: true })
  termination_reason!: string | null;

  /** The group whose cancellation terminated this job, when that is why it is terminated. */
  @ApiProperty({
    type: 'integer',
    nullable: true,
    description: 'The group whose cancellation terminated this job, when that is why.',
  })
  cancelled_job_group_id!: number | null;

  @ApiProperty({ type: String, format: 'uuid', isArray: true, description: 'Parent job ids (dependencies).' })
  depends_on!: string[];

  @ApiProperty({
    type: 'integer',
    minimum: 0,
    description: 'Parents not finished yet; the job is `pending` while above 0.',
  })
  n_pending_parents!: number;

  @ApiProperty({
    description:
      'Runs once its parents have finished, whatever their outcome; a cancellation (not an abort) spares it.',
  })
  always_run!: boolean;

  @ApiProperty({ type: 'integer', minimum: 0 })
  submission_count!: number;

  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'integer' },
    description: 'Submissions not listed, counted by termination reason.',
  })
  folded_submissions!: Record<string, number>;

  @ApiProperty({
    type: () => SubmissionView,
    nullable: true,
    description:
      "The job's newest submission. When `job_submissions` is not empty it is also that list's last item, which " +
      'alone carries its `provisioning_data` and `runtime_data`: here both are left out, so a page sends them once.',
  })
  latest_job_submission!: SubmissionView | null;

  @ApiProperty({
    type: () => SubmissionView,
    isArray: true,
    description:
      "The job's newest submissions, ascending by submission_num: the last item is the newest, in full " +
      '(`job_submissions[-1]`). Older items carry their documents only where `submission_data=all` asks.',
  })
  job_submissions!: SubmissionView[];
}

export class JobList {
  @ApiProperty({ type: () => JobView, isArray: true })
  jobs!: JobView[];
}
