import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, IsUUID, Matches, MaxLength } from 'class-validator';
import { PageQueryDto } from '../../../common/pagination/cursor';
import { EVENT_TYPES, type EventType } from '../event-types';

const escaped = EVENT_TYPES.map((t) => t.replace('.', '\\.'));
/** A comma list of known event types. */
export const EVENT_TYPE_LIST = `^(${escaped.join('|')})(,(${escaped.join('|')}))*$`;

export class EventsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({
    format: 'uuid',
    description: 'Events of this run only (a run of the project: any other id is a 404).',
  })
  @IsOptional()
  @IsString()
  @IsUUID('all')
  run_id?: string;

  @ApiPropertyOptional({
    pattern: EVENT_TYPE_LIST,
    maxLength: 200,
    description: `Comma list of event types: ${EVENT_TYPES.join(', ')}.`,
  })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  @Matches(new RegExp(EVENT_TYPE_LIST), { message: `must be a comma list of ${EVENT_TYPES.join(', ')}` })
  type?: string;
}

export class EventView {
  @ApiProperty({
    type: 'integer',
    minimum: 1,
    description:
      'Numbers events as they are written. The feed is ordered by its cursor (transaction, then seq), not by seq ' +
      'alone: concurrent transactions may show seqs out of order (see the route).',
  })
  seq!: number;

  @ApiProperty({ format: 'date-time', description: "Start of the change's transaction (as its other timestamps)." })
  at!: string;

  @ApiProperty({ enum: EVENT_TYPES })
  type!: EventType;

  @ApiProperty({ description: 'Project name.' })
  project!: string;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  run_id!: string | null;

  @ApiProperty({ type: 'integer', nullable: true, description: '0 for the run itself.' })
  job_group_id!: number | null;

  @ApiProperty({ type: String, format: 'uuid', nullable: true })
  job_id!: string | null;

  @ApiProperty({ type: 'integer', nullable: true })
  submission_num!: number | null;

  @ApiProperty({
    type: String,
    nullable: true,
    description:
      'The new status: a run status (run.status), a submission status (job.status), a group status (group.status), ' +
      '`cancelled` (group.cancelled); null for project.budget_exceeded.',
  })
  status!: string | null;

  @ApiProperty({
    type: String,
    nullable: true,
    description: "A termination reason, a run's termination reason, or a cancellation's reason.",
  })
  reason!: string | null;

  @ApiProperty({ type: String, nullable: true, description: 'Who did it: a user name, or `system`.' })
  by!: string | null;
}
