import { registerDecorator, ValidateIf, ValidationOptions } from 'class-validator';

/**
 * An optional body field: only absence skips validation. Unlike `IsOptional`, `null` is a value like any other and is
 * refused unless the field's own rules allow it (the OpenAPI document says which fields are nullable).
 */
export const Optional = (options?: ValidationOptions): PropertyDecorator => ValidateIf((_, value) => value !== undefined, options);

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
          typeof value === 'object' && value !== null && !Array.isArray(value) && JSON.stringify(value).length <= maxBytes,
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
          return entries.length <= 500 && entries.every(([k, v]) => /^[A-Za-z_][A-Za-z0-9_]{0,255}$/.test(k) && typeof v === 'string' && v.length <= 32768);
        },
      },
    });
}
