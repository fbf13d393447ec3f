import { PipeTransform } from '@nestjs/common';
import { DomainError } from '../errors/domain-error';

/** A non-negative integer path parameter (e.g. a job group id); anything else is a 400 naming the parameter. */
export class IntParamPipe implements PipeTransform<string, number> {
  constructor(private readonly name: string) {}

  transform(value: string): number {
    if (!/^\d{1,10}$/.test(value) || Number(value) > 2_147_483_647) {
      throw new DomainError('VALIDATION_FAILED', `${this.name} must be a non-negative integer`, [{ field: this.name, message: 'must be a non-negative integer' }]);
    }
    return Number(value);
  }
}
