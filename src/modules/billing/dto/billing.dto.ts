import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, Max, Min } from 'class-validator';
import { IsCalendarDate, IsFixedPoint } from '../../../common/validation/validators';

export const REPORT_DIMENSIONS = ['user', 'day', 'resource'] as const;
export type ReportDimension = (typeof REPORT_DIMENSIONS)[number];

export class NewRateDto {
  @IsString()
  @Matches(/^[a-z][a-z0-9_-]{0,31}$/, { message: 'name must be 1-32 lowercase letters, digits, _ or -, starting with a letter' })
  name!: string;

  @IsFixedPoint(10) // numeric(20, 10)
  @Min(0)
  @Max(1e9)
  rate_usd_per_unit_hour!: number;

  /** Required for a new resource; defaults to the previous version's unit. */
  @IsOptional()
  @IsString()
  @Matches(/^[A-Za-z][A-Za-z0-9_-]{0,31}$/, { message: 'unit must be 1-32 letters, digits, _ or -' })
  unit?: string;
}

export interface ResourceView {
  id: number;
  name: string;
  unit: string;
  rate_usd_per_unit_hour: number;
  version: number;
  valid_from: string;
}

export interface CostBreakdownItem {
  resource: string;
  /** Unit-hours. */
  usage: number;
  unit: string;
  cost_usd: number;
}

/** Cost exact at the moment of the request: closed usage plus what running submissions have used since their last rollup. */
export interface CostReport {
  total_usd: number;
  running_usd: number;
  breakdown: CostBreakdownItem[];
}

export class BillingReportQueryDto {
  @IsCalendarDate()
  from!: string;

  @IsCalendarDate()
  to!: string;

  @ApiPropertyOptional({ description: 'Comma list of user, day, resource (default day). A report answers at most 100,000 rows; a bigger one is a 400 naming `to`.' })
  @IsOptional()
  @Matches(/^(user|day|resource)(,(user|day|resource))*$/, { message: 'must be a comma list of user, day, resource' })
  group_by?: string;
}

/** One row of a billing report; the dimensions not grouped by are absent. Usage only when grouped by resource. */
export interface BillingReportRow {
  user?: string;
  day?: string;
  resource?: string;
  unit?: string;
  usage?: number;
  cost_usd: number;
}
