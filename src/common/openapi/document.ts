import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import { ERROR_STATUS } from '../errors/domain-error';
import { errorCodesFor, errorResponse, errorSchema, errorSchemaName } from './api-docs';

const DESCRIPTION =
  'Control plane of a batch-compute service: runs of jobs, retried as submissions, nested job groups cancelled as a ' +
  'unit, compute billed per second. Errors are `{status_code, code, message, details}` ' +
  '(each response lists the codes its status may carry); ' +
  'lists are keyset-paginated with `limit` (≤100) and an opaque `cursor`; creating POSTs ' +
  'accept `Idempotency-Key`; unknown body fields are rejected. Tokens are opaque bearer tokens. Run views carry ' +
  '`job_counts` by status and at most `jobs_limit` jobs (`jobs_truncated` when cut; every job: ' +
  '`GET .../job-groups/0/jobs?recursive=true`); every response is bounded by its parameters (README, "Limits").';

/** The OpenAPI document of the app's routes, as served at /docs-json and committed as openapi.json. */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('runplane')
    .setDescription(DESCRIPTION)
    .setVersion('1')
    .addBearerAuth({
      type: 'http',
      scheme: 'bearer',
      description: 'An opaque token (from `POST /api/v1/users` or `POST /api/v1/users/me/tokens`).',
    })
    .build();
  // DocumentBuilder adds `bearerFormat: JWT` by default; these tokens are opaque.
  for (const scheme of Object.values(config.components?.securitySchemes ?? {}))
    delete (scheme as { bearerFormat?: string }).bearerFormat;
  return finishDocument(SwaggerModule.createDocument(app, config));
}

/**
 * What the decorators can't say: the error schemas every error response refers to, and exact objects (no field
 * beyond those listed: request bodies with unknown fields are refused, and responses carry nothing undocumented).
 */
function finishDocument(doc: OpenAPIObject): OpenAPIObject {
  const schemas = (doc.components ??= {}).schemas ?? {};
  for (const schema of Object.values(schemas)) {
    const s = schema as { type?: string; properties?: object; additionalProperties?: unknown };
    if (s.properties && s.additionalProperties === undefined) s.additionalProperties = false;
  }
  for (const status of [...new Set<number>(Object.values(ERROR_STATUS))].sort((a, b) => a - b))
    schemas[errorSchemaName(status)] = errorSchema(status);
  addTransportErrors(doc);
  doc.components.schemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  return doc;
}

/**
 * Errors met before a request reaches its route, so no route's decorators name them: a request Node's HTTP parser
 * refuses (400 malformed, 408 too slow, 413 oversized chunk extensions, 431 headers too large) on any route; a body
 * in an unsupported media type or encoding (415) on routes that take one. Listed once the server has codes for them.
 */
function addTransportErrors(doc: OpenAPIObject): void {
  for (const item of Object.values(doc.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const op = item[method];
      if (!op) continue;
      const statuses = [400, 408, 413, 431, ...(op.requestBody ? [415] : [])];
      for (const status of statuses)
        if (errorCodesFor(status).length && !op.responses[status]) op.responses[status] = errorResponse(status);
    }
  }
}
