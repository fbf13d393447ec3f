import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsObject } from 'class-validator';
import { WorkerReportDto } from './worker.dto';

export const REPORT_KINDS = ['running', 'heartbeat', 'complete'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];
export const MAX_REPORTS_PER_BATCH = 100;

export class ReportBatchDto extends WorkerReportDto {
  @ApiProperty({
    type: 'array',
    minItems: 1,
    maxItems: MAX_REPORTS_PER_BATCH,
    items: { type: 'object', additionalProperties: true },
    description:
      `At most ${MAX_REPORTS_PER_BATCH} reports of this worker, each applied as its own route would ` +
      '(`POST /internal/v1/submissions/{submission_id}/{kind}`): `{submission_id, kind, ...}` where `kind` is ' +
      "`running`, `heartbeat` or `complete` and the rest is that route's body without `worker_id` (the batch has " +
      "it). A report that breaks its route's rules gets that route's error in its result, not the whole batch. " +
      "A submission's reports take effect in the order sent; reports of different submissions are applied " +
      'together, in one transaction.',
  })
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_REPORTS_PER_BATCH)
  @IsObject({ each: true, message: 'each must be a JSON object' })
  reports!: Record<string, unknown>[];
}

export class ReportResultView {
  @ApiProperty({ type: 'string', nullable: true, description: 'As sent (null when it was not a string).' })
  submission_id!: string | null;

  @ApiProperty({ type: 'string', nullable: true, description: 'As sent (null when it was not a string).' })
  kind!: string | null;

  @ApiProperty({ type: 'integer', description: 'What the single route would have answered: 200, or the error status.' })
  status_code!: number;

  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description:
      'What the single route would have answered: with 200 its answer (RunningView, HeartbeatView or CompleteView), ' +
      'else its error (`{code, message, details}`, as every error of the API).',
  })
  body!: object;
}

export class ReportBatchView {
  @ApiProperty({ type: () => ReportResultView, isArray: true, description: 'One per report, in the same order.' })
  results!: ReportResultView[];
}
