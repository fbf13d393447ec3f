import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsObject } from 'class-validator';
import { WorkerReportDto } from './worker.dto';

export const REPORT_TYPES = ['running', 'heartbeat', 'complete'] as const;
export type ReportType = (typeof REPORT_TYPES)[number];
export const MAX_REPORTS_PER_BATCH = 100;

export class ReportBatchDto extends WorkerReportDto {
  @ApiProperty({
    type: 'array',
    minItems: 1,
    maxItems: MAX_REPORTS_PER_BATCH,
    items: { type: 'object', additionalProperties: true },
    description:
      `At most ${MAX_REPORTS_PER_BATCH} reports of this worker, applied in order, each as its own route would ` +
      '(`POST /internal/v1/submissions/{submission_id}/{type}`): `{submission_id, type, ...}` where `type` is ' +
      "`running`, `heartbeat` or `complete` and the rest is that route's body without `worker_id` (the batch has " +
      "it). A report that breaks its route's rules gets that route's error in its result, not the whole batch.",
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_REPORTS_PER_BATCH)
  @IsObject({ each: true, message: 'each must be a JSON object' })
  reports!: Record<string, unknown>[];
}

export class ReportErrorView {
  @ApiProperty({ type: 'integer' })
  status_code!: number;

  @ApiProperty()
  code!: string;

  @ApiProperty()
  message!: string;

  @ApiProperty({ type: 'array', items: { type: 'object', additionalProperties: true } })
  details!: unknown[];
}

export class ReportResultView {
  @ApiProperty({ type: 'string', nullable: true, description: 'As sent (null when it was not a string).' })
  submission_id!: string | null;

  @ApiProperty({ type: 'string', nullable: true, description: 'As sent (null when it was not a string).' })
  type!: string | null;

  @ApiProperty({ type: 'integer', description: 'What the single route would have answered: 200, or the error status.' })
  status!: number;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: "With 200: the single route's answer (RunningView, HeartbeatView or CompleteView).",
  })
  body?: object;

  @ApiPropertyOptional({ type: () => ReportErrorView, description: "Otherwise: the single route's error." })
  error?: ReportErrorView;
}

export class ReportBatchView {
  @ApiProperty({ type: () => ReportResultView, isArray: true, description: 'One per report, in the same order.' })
  results!: ReportResultView[];
}
