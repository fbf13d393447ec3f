import { applyDecorators, Type } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOkResponse, ApiParam, ApiProperty, ApiResponse } from '@nestjs/swagger';
import { ERROR_STATUS } from '../errors/domain-error';

/**
 * Decorators that make the OpenAPI document the contract: error responses with the shared error shape and the codes
 * each status may carry, bearer auth, pages of a view, and the path parameters every route shares. The project is
 * compiled by plain tsc and swc, so the Nest CLI plugin's compile-time schema inference never runs: every schema is
 * spelled out with these and `@ApiProperty`.
 */

const STATUS_MEANING: Record<number, string> = {
  400: 'The request is invalid; `details` names each field.',
  401: 'Missing or unknown bearer token.',
  402: 'The project is at or over its billing limit.',
  403: 'The token may not do this (wrong role, or not allowed in the project).',
  404: 'Not found, or not visible to the caller.',
  409: 'Conflicts with the current state.',
  413: 'The request (or what it would store) is too large.',
  408: 'The request took too long to arrive.',
  415: 'The body is not JSON.',
  422: 'Well-formed but not processable.',
  429: 'Too many requests; retry after `Retry-After` seconds.',
  431: 'Request headers too large.',
  500: 'Internal error.',
  503: 'The database is unavailable or busy; retry after `Retry-After` seconds.',
};

/** Every error code that the API answers with a given HTTP status. */
export function errorCodesFor(status: number): string[] {
  return Object.entries(ERROR_STATUS as Record<string, number>)
    .filter(([, s]) => s === status)
    .map(([code]) => code);
}

export const errorSchemaName = (status: number) => `Error${status}`;

/** The shared error shape, with `status_code` fixed and `code` limited to the codes of that status. */
export function errorSchema(status: number): Record<string, unknown> {
  return {
    type: 'object',
    required: ['status_code', 'code', 'message', 'details'],
    additionalProperties: false,
    properties: {
      status_code: { type: 'integer', enum: [status] },
      code: { type: 'string', enum: errorCodesFor(status) },
      message: { type: 'string' },
      details: { type: 'array', items: {}, description: 'Usually `{field, message}` per problem.' },
    },
  };
}

/** The response object of one error status: its meaning, its codes, the shared schema. */
export function errorResponse(status: number): {
  description: string;
  content: { 'application/json': { schema: { $ref: string } } };
} {
  const codes = errorCodesFor(status);
  if (codes.length === 0) throw new Error(`error status ${status}: no error code has this status`);
  return {
    description: `${STATUS_MEANING[status] ?? 'Error.'} Codes: ${codes.map((c) => `\`${c}\``).join(', ')}.`,
    content: { 'application/json': { schema: { $ref: `#/components/schemas/${errorSchemaName(status)}` } } },
  };
}

/** Error responses of a route (or of every route of a controller), each with the shared error schema. */
export function ApiErrors(...statuses: number[]): MethodDecorator & ClassDecorator {
  return applyDecorators(
    ...statuses.map((status) => {
      const { description, content } = errorResponse(status);
      return ApiResponse({ status, description, schema: content['application/json'].schema });
    }),
  ) as MethodDecorator & ClassDecorator;
}

/** Routes that need a bearer token: 401 without a good one, 403 for the wrong role, 429 past the rate limit, 503. */
export const ApiAuthenticated = (): ClassDecorator & MethodDecorator =>
  applyDecorators(ApiBearerAuth(), ApiErrors(401, 403, 429, 503)) as ClassDecorator & MethodDecorator;

/** `Idempotency-Key` on creating POSTs: same key + same body → the original response; different body → 409. */
export const ApiIdempotencyKey = () =>
  ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'Same key and body: the original response again. Same key, different body: 409 `IDEMPOTENCY_KEY_REUSED`.',
    schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
  });

export const ApiProjectParam = () =>
  ApiParam({ name: 'project', description: 'Project name.', schema: { type: 'string', minLength: 1, maxLength: 63 } });
export const ApiUuidParam = (name: string, what: string) =>
  ApiParam({ name, description: `${what} id (anything else is a 404).`, schema: { type: 'string', format: 'uuid' } });
export const ApiGroupParam = (name = 'g') =>
  ApiParam({
    name,
    description: 'Job group id; 0 is the run itself.',
    schema: { type: 'integer', minimum: 0, maximum: 2_147_483_647 },
  });

const pages = new Map<Type<unknown>, Type<unknown>>();

/** The schema class of `{items: T[], next_cursor}` for one view class (named `<View>Page`). */
export function PageOf(item: Type<unknown>): Type<unknown> {
  const known = pages.get(item);
  if (known) return known;
  class PageOfItem {
    @ApiProperty({ type: () => item, isArray: true })
    items!: unknown[];

    @ApiProperty({
      type: String,
      nullable: true,
      description: 'Opaque; pass as `cursor` for the next page. null on the last page.',
    })
    next_cursor!: string | null;
  }
  Object.defineProperty(PageOfItem, 'name', { value: `${item.name.replace(/View$/, '')}Page` });
  pages.set(item, PageOfItem);
  return PageOfItem;
}

/** 200 with a page of `item`. */
export const ApiPageResponse = (item: Type<unknown>, description?: string) =>
  ApiOkResponse({ type: PageOf(item), description });
