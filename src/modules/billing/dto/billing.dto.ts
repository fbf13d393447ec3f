import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { IsCalendarDate, IsFixedPoint, Optional } from '../../../common/validation/validators';

export const REPORT_DIMENSIONS = ['user', 'day', 'resource'] as const;
export type ReportDimension = (typeof REPORT_DIMENSIONS)[number];

export class NewRateDto {
  @ApiProperty({
    pattern: '^[a-z][a-z0-9_-]{0,31}$',
    description:
      'A billed resource: one a requestable resource key maps to (as of this version cpu, memory, gpu, disk); ' +
      'any other name is a 400 naming `name` (adding a resource is a migration).',
  })
  @IsString()
  @Matches(/^[a-z][a-z0-9_-]{0,31}$/, {
    message: 'name must be 1-32 lowercase letters, digits, _ or -, starting with a letter',
  })
  name!: string;

  @ApiProperty({ minimum: 0, maximum: 1e9, description: 'USD per unit-hour, at most 10 decimals.' })
  @IsFixedPoint(10) // numeric(20, 10)
  @Min(0)
  @Max(1e9)
  rate_usd_per_unit_hour!: number;

  /** The unit the resource is billed in (its requestable key's); a different one is refused. */
  @ApiPropertyOptional({
    pattern: '^[A-Za-z][A-Za-z0-9_-]{0,31}$',
    description:
      "May be left out: the unit is the one the resource's requestable key bills in; a different one is a 400.",
  })
  @Optional()
  @IsString()
  @Matches(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, { message: 'unit must be 1-32 letters, digits, _ or -' })
  unit?: string;
}

export class ResourceView {
  @ApiProperty({ type: 'integer' })
  id!: number;

  @ApiProperty()
  name!: string;

  @ApiProperty()
  unit!: string;

  @ApiProperty()
  rate_usd_per_unit_hour!: number;

  @ApiProperty({ type: 'integer' })
  version!: number;

  @ApiProperty({ format: 'date-time' })
  valid_from!: string;
}

export class ResourceList {
  @ApiProperty({ type: () => ResourceView, isArray: true })
  items!: ResourceView[];
}

export class CostBreakdownItem {
  @ApiProperty()
  resource!: string;

  /** Unit-hours. */
  @ApiProperty({ description: 'Unit-hours.' })
  usage!: number;

  @ApiProperty()
  unit!: string;

  @ApiProperty()
  cost_usd!: number;
}

/**
 * Cost exact at the moment of the request: closed usage plus what running submissions have used since their last
 * rollup.
 */
export class CostReport {
  @ApiProperty()
  total_usd!: number;

  @ApiProperty({ description: 'The part of the total used by submissions still running.' })
  running_usd!: number;

  @ApiProperty({ type: () => CostBreakdownItem, isArray: true })
  breakdown!: CostBreakdownItem[];
}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const GROUP_BY = /^(user|day|resource)(,(user|day|resource))*$/;

export class BillingReportQueryDto {
  @ApiProperty({ pattern: DATE.source, description: 'First UTC day, YYYY-MM-DD (inclusive).' })
  @IsCalendarDate()
  from!: string;

  @ApiProperty({ pattern: DATE.source, description: 'Last UTC day, YYYY-MM-DD (inclusive); not before `from`.' })
  @IsCalendarDate()
  to!: string;

  @ApiPropertyOptional({
    pattern: GROUP_BY.source,
    default: 'day',
    description:
      'Comma list of `user`, `day`, `resource`. A report answers at most 100,000 rows; a bigger one is a 400 ' +
      'naming `to`.',
  })
  @IsOptional()
  @Matches(GROUP_BY, { message: 'must be a comma list of user, day, resource' })
  group_by?: string;
}

/** One row of a billing report; the dimensions not grouped by are absent. Usage only when grouped by resource. */
export class BillingReportRow {
  @ApiPropertyOptional({ description: 'User name (grouped by user).' })
  user?: string;

  @ApiPropertyOptional({ format: 'date', description: 'UTC day (grouped by day).' })
  day?: string;

  @ApiPropertyOptional({ description: 'Grouped by resource.' })
  resource?: string;

  @ApiPropertyOptional({ description: 'Grouped by resource.' })
  unit?: string;

  @ApiPropertyOptional({ description: 'Unit-hours (grouped by resource).' })
  usage?: number;

  @ApiProperty()
  cost_usd!: number;
}

export class BillingReport {
  @ApiProperty({ type: () => BillingReportRow, isArray: true })
  items!: BillingReportRow[];
}
