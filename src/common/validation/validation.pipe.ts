import { ArgumentMetadata, ValidationError, ValidationPipe } from '@nestjs/common';
import { DomainError } from '../errors/domain-error';
import { assertStorableInput } from './input-guard';

interface FieldProblem {
  field: string;
  message: string;
}

/** class-validator says "x must be ..." or "property x should not exist"; keep only the predicate. */
function withoutSubject(message: string, property: string): string {
  for (const subject of [`property ${property} `, `${property} `]) {
    if (message.startsWith(subject)) return message.slice(subject.length);
  }
  return message;
}

function flatten(errors: ValidationError[], prefix = ''): FieldProblem[] {
  return errors.flatMap((e) => {
    const field = prefix
      ? /^\d+$/.test(e.property)
        ? `${prefix}[${e.property}]`
        : `${prefix}.${e.property}`
      : e.property;
    const own = Object.values(e.constraints ?? {}).map((message) => ({
      field,
      message: withoutSubject(message, e.property),
    }));
    return [...own, ...flatten(e.children ?? [], field)];
  });
}

/**
 * The global pipe: whitelisting, unknown fields rejected, DTOs built and validated. Before any of that, bodies and
 * queries are walked once for what no validator should meet (see input-guard): depth, NUL, lone surrogates,
 * prototype-named keys. Route parameters are left as strings for their own pipes (IntParamPipe): Nest's implicit
 * `Number(...)` would take `0x1`, ` 1` and `1e3` for numbers.
 */
export class ApiValidationPipe extends ValidationPipe {
  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'body' || metadata.type === 'query') {
      const isDto =
        typeof metadata.metatype === 'function' &&
        ![Object, Array, String, Number, Boolean].includes(metadata.metatype as never);
      // Raw bytes (an application/octet-stream body): a route that takes bytes (an untyped body) judges them
      // itself; a route that takes a JSON object refuses them below.
      if (Buffer.isBuffer(value) && !isDto) return value;
      if (!Buffer.isBuffer(value)) assertStorableInput(value, metadata.data ?? '');
      if (
        metadata.type === 'body' &&
        isDto &&
        value !== undefined &&
        (value === null || typeof value !== 'object' || Array.isArray(value) || Buffer.isBuffer(value))
      ) {
        throw new DomainError('VALIDATION_FAILED', 'body must be a JSON object', [
          { field: 'body', message: 'must be a JSON object' },
        ]);
      }
    }
    return super.transform(value, metadata);
  }

  protected override transformPrimitive(value: unknown): unknown {
    return value;
  }
}

export function apiValidationPipe(): ValidationPipe {
  return new ApiValidationPipe({
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    transform: true,
    transformOptions: { enableImplicitConversion: false },
    validationError: { target: false, value: false },
    exceptionFactory: (errors) => {
      const problems = flatten(errors);
      const message = problems.map((p) => `${p.field} ${p.message}`).join('; ') || 'invalid request';
      return new DomainError('VALIDATION_FAILED', message, problems);
    },
  });
}
