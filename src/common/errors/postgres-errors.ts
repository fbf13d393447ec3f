import { DomainError } from './domain-error';

/** Postgres errors a caller's request can cause, keyed by SQLSTATE, mapped to API errors without leaking SQL. */
export function fromPostgresError(err: { code?: string; constraint?: string }): DomainError | undefined {
  switch (err.code) {
    case '23505':
      return new DomainError(
        'ALREADY_EXISTS',
        uniqueMessage(err.constraint),
        err.constraint ? [{ constraint: err.constraint }] : [],
      );
    case '23503':
      return new DomainError(
        'CONFLICT',
        'a referenced record does not exist or is still referenced',
        err.constraint ? [{ constraint: err.constraint }] : [],
      );
    case '23514':
    case '23502':
      return new DomainError(
        'VALIDATION_FAILED',
        'a value breaks a constraint',
        err.constraint ? [{ constraint: err.constraint }] : [],
      );
    case '22P02':
    case '22003':
    case '22007':
    case '22008':
    case '22023':
    case '2201X':
    case '2201W':
      return new DomainError('VALIDATION_FAILED', 'a value is malformed or out of range');
    case '22021': // character_not_in_repertoire: NUL in text (the input guard refuses it first, naming the field)
    case '22P05': // untranslatable_character: \u0000 in jsonb
      return new DomainError('VALIDATION_FAILED', 'a text value holds characters the database cannot store');
    case '54000':
    case '54001':
      return new DomainError('PAYLOAD_TOO_LARGE', 'the request is too large');
    case '40001':
    case '40P01':
    case '55P03':
    case '57014':
      return new DomainError('SERVICE_UNAVAILABLE', 'the database is busy; retry the request');
    default:
      return undefined;
  }
}

const UNIQUE_MESSAGES: Record<string, string> = {
  uq_users_name: 'a user with this name already exists',
  uq_projects_name: 'a project with this name already exists',
  uq_runs_project_id_run_name: 'a run with this name already exists in the project',
  uq_resources_name_version: 'this resource version already exists',
};

function uniqueMessage(constraint?: string): string {
  return (constraint && UNIQUE_MESSAGES[constraint]) || 'a record with these values already exists';
}
