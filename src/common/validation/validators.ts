import { Transform } from 'class-transformer';
import { registerDecorator, ValidateIf, ValidationOptions } from 'class-validator';
import { DomainError } from '../errors/domain-error';

/**
 * An optional body field: only absence skips validation. Unlike `IsOptional`, `null` is a value like any other and is
 * refused unless the field's own rules allow it (the OpenAPI document says which fields are nullable).
 */
export const Optional = (options?: ValidationOptions): PropertyDecorator =>
  ValidateIf((_, value) => value !== undefined, options);

/** A plain JSON object of at most `maxBytes` when serialised (attributes, free-form data). */
export function IsJsonObject(maxBytes: number, options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isJsonObject',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: `must be a JSON object of at most ${maxBytes} bytes`, ...options },
      validator: {
        validate: (value: unknown) =>
          typeof value === 'object' &&
          value !== null &&
          !Array.isArray(value) &&
          JSON.stringify(value).length <= maxBytes,
      },
    });
}

/** An object of string values with environment-variable keys. */
export function IsEnvMap(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isEnvMap',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: 'must map names like FOO_BAR (at most 500) to strings of at most 32 KiB', ...options },
      validator: {
        validate: (value: unknown) => {
          if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
          const entries = Object.entries(value);
          return (
            entries.length <= 500 &&
            entries.every(
              ([k, v]) => /^[A-Za-z_][A-Za-z0-9_]{0,255}$/.test(k) && typeof v === 'string' && v.length <= 32768,
            )
          );
        },
      },
    });
}

/**
 * A number that a `numeric(p, scale)` column stores exactly: finite and a multiple of 10^-scale, judged on the value
 * (class-validator's `maxDecimalPlaces` reads the printed form: `1e-7` threw, `1.5e-7` passed and was stored as 0).
 */
export function IsFixedPoint(scale: number, options?: ValidationOptions): PropertyDecorator {
  const step = scale === 0 ? '1' : `0.${'0'.repeat(scale - 1)}1`;
  return (target, propertyName) =>
    registerDecorator({
      name: 'isFixedPoint',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: `must be a number with at most ${scale} decimal places (a multiple of ${step})`, ...options },
      validator: {
        // Within toFixed's range the double nearest a `scale`-place decimal is the one its text parses back to.
        validate: (value: unknown) =>
          typeof value === 'number' &&
          Number.isFinite(value) &&
          Math.abs(value) < 1e21 &&
          Number(value.toFixed(scale)) === value,
      },
    });
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A real calendar day `YYYY-MM-DD` from 0001-01-01 to 9999-12-31 (`2024-02-30` is refused here, not by SQL). */
export function isCalendarDate(value: unknown): boolean {
  const m = typeof value === 'string' ? DATE.exec(value) : null;
  if (!m) return false;
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return year >= 1 && days !== undefined && day >= 1 && day <= days;
}

export function IsCalendarDate(options?: ValidationOptions): PropertyDecorator {
  return (target, propertyName) =>
    registerDecorator({
      name: 'isCalendarDate',
      target: target.constructor,
      propertyName: propertyName as string,
      options: { message: 'must be a calendar date YYYY-MM-DD', ...options },
      validator: { validate: isCalendarDate },
    });
}

/** Canonical decimal integers only: no sign but `-`, no leading zeros, spaces, exponents, hex or fractions. */
export const CANONICAL_INT = /^(0|-?[1-9]\d{0,14})$/;

/**
 * An integer query parameter, converted only from its canonical decimal text (`@Type(() => Number)` took `1e1`,
 * `01`, ` 5` and `0x5`). Anything else is refused here, naming the parameter; range checks stay with @Min/@Max.
 */
export function ToStrictInt(): PropertyDecorator {
  return Transform(({ value, key }: { value: unknown; key: string }) => {
    if (typeof value === 'number' || value === undefined) return value;
    if (typeof value === 'string' && CANONICAL_INT.test(value)) return Number(value);
    throw new DomainError('VALIDATION_FAILED', `${key} must be a decimal integer`, [
      { field: key, message: 'must be a decimal integer' },
    ]);
  });
}
