import { ValidationError, ValidationPipe } from '@nestjs/common';
import { DomainError } from '../errors/domain-error';

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
    const field = prefix ? (/^\d+$/.test(e.property) ? `${prefix}[${e.property}]` : `${prefix}.${e.property}`) : e.property;
    const own = Object.values(e.constraints ?? {}).map((message) => ({ field, message: withoutSubject(message, e.property) }));
    return [...own, ...flatten(e.children ?? [], field)];
  });
}

/** Whitelisting, unknown fields rejected, types transformed; failures become VALIDATION_FAILED naming each field. */
export function apiValidationPipe(): ValidationPipe {
  return new ValidationPipe({
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
