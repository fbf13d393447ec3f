/** Stable error codes of the API; each maps to one HTTP status. */
export const ERROR_STATUS = {
  VALIDATION_FAILED: 400,
  MAX_DEPTH_EXCEEDED: 400,
  DEPENDENCY_INVALID: 400,
  INVALID_CURSOR: 400,
  UNAUTHENTICATED: 401,
  BILLING_LIMIT_EXCEEDED: 402,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  ALREADY_EXISTS: 409,
  GROUP_CANCELLED: 409,
  RUN_NOT_FINISHED: 409,
  IDEMPOTENCY_KEY_REUSED: 409,
  STALE_SUBMISSION: 409,
  TOKEN_LIMIT_REACHED: 409,
  QUEUE_LIMIT_EXCEEDED: 409,
  TRANSITION_NOT_ALLOWED: 409,
  LOG_OFFSET_GAP: 409,
  LOG_DATA_MISMATCH: 409,
  REQUEST_TIMEOUT: 408,
  PAYLOAD_TOO_LARGE: 413,
  LOG_QUOTA_EXCEEDED: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  UNPROCESSABLE: 422,
  TOO_MANY_REQUESTS: 429,
  RATE_LIMITED: 429,
  REQUEST_HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  DATABASE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** What services throw; the global filter turns it into the API's error JSON. */
export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: unknown[] = [],
  ) {
    super(message);
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const notFound = (what: string) => new DomainError('NOT_FOUND', `${what} not found`);
export const forbidden = (message = 'not allowed') => new DomainError('FORBIDDEN', message);
export const validationFailed = (field: string, message: string) =>
  new DomainError('VALIDATION_FAILED', `${field} ${message}`, [{ field, message }]);
