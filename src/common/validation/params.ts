import { PipeTransform } from '@nestjs/common';
import { DomainError } from '../errors/domain-error';

/** A UUID as PostgreSQL's uuid type reads it in its canonical form; test ids with it before they reach SQL. */
export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A non-negative integer path parameter (e.g. a job group id) in canonical decimal: `0x1`, `01`, ` 1`, `1e3`, `+1`
 * and `-0` are refused, not read as numbers. Anything else is a 400 naming the parameter.
 */
export class IntParamPipe implements PipeTransform<unknown, number> {
  /** `field` is the parameter's name in the route (`g`); `what` says what it is (`job group id`). */
  constructor(
    private readonly field: string,
    private readonly what = field,
  ) {}

  transform(value: unknown): number {
    if (typeof value !== 'string' || !/^(0|[1-9]\d{0,9})$/.test(value) || Number(value) > 2_147_483_647) {
      throw new DomainError(
        'VALIDATION_FAILED',
        `${this.field} (the ${this.what}) must be a non-negative decimal integer`,
        [
          {
            field: this.field,
            message: `must be a non-negative decimal integer (the ${this.what}, at most 2147483647)`,
          },
        ],
      );
    }
    return Number(value);
  }
}
