import Ajv, { ValidateFunction } from 'ajv';
import { required } from '../../src/common/required';

/** The parts of an OpenAPI 3.0 document the tests read. */
export type Schema = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required?: boolean;
  schema: Schema;
}

export interface Operation {
  method: string;
  path: string;
  operationId: string;
  parameters: Parameter[];
  requestBody?: {
    required?: boolean;
    content: { 'application/json'?: { schema: Schema }; 'application/octet-stream'?: { schema: Schema } };
  };
  responses: Record<string, { content?: { 'application/json'?: { schema: Schema } } }>;
  security?: unknown[];
}

export interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
  components: { schemas: Record<string, Schema> };
}

export function operationsOf(doc: OpenApiDocument): Operation[] {
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      ...op,
      parameters: op.parameters ?? [],
      method: method.toUpperCase(),
      path,
    })),
  );
}

export const routeKey = (op: { method: string; path: string }) => `${op.method} ${op.path}`;

/**
 * OpenAPI 3.0 schema → JSON Schema for ajv, kept strict: `nullable` becomes a `null` alternative, references point
 * into the document's components. Nothing is loosened: objects stay as exact as the document says.
 */
export function toJsonSchema(schema: Schema): Schema {
  if (Array.isArray(schema)) return schema.map(toJsonSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'nullable' || key === 'example' || key === 'examples') continue;
    if (key === '$ref') out.$ref = `openapi#/definitions/${String(value).split('/').pop()}`;
    else if (key === 'properties' || key === 'patternProperties')
      out[key] = Object.fromEntries(Object.entries(value as Schema).map(([k, v]) => [k, toJsonSchema(v)]));
    else if (typeof value === 'object' && value !== null) out[key] = toJsonSchema(value);
    else out[key] = value;
  }
  if (schema.nullable !== true) return out;
  if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
  if (typeof out.type === 'string' && !out.allOf && !out.$ref) return { ...out, type: [out.type, 'null'] };
  return { anyOf: [{ type: 'null' }, out] };
}

const FORMATS: Record<string, RegExp> = {
  uuid: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i,
  'date-time': /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/,
  date: /^\d{4}-\d{2}-\d{2}$/,
};

/** One ajv over the document's components; compiled validators cached per schema. */
export class SchemaValidator {
  private readonly ajv: Ajv;
  private readonly cache = new Map<Schema, ValidateFunction>();

  constructor(doc: OpenApiDocument) {
    this.ajv = new Ajv({ strict: true, allowUnionTypes: true, allErrors: false, unicodeRegExp: false });
    for (const [name, re] of Object.entries(FORMATS)) this.ajv.addFormat(name, re);
    this.ajv.addSchema({ $id: 'openapi', definitions: toJsonSchema(doc.components.schemas) });
  }

  /** null when valid, else ajv's first complaint. */
  check(schema: Schema, value: unknown): string | null {
    let validate = this.cache.get(schema);
    if (!validate) {
      validate = this.ajv.compile(toJsonSchema(schema));
      this.cache.set(schema, validate);
    }
    if (validate(value)) return null;
    const e = required(validate.errors?.[0], 'the reason the schema refused the value');
    return `${e.instancePath || '(root)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`;
  }

  /** The component a `$ref` names, or the schema itself (also unwraps swagger's `allOf: [ref]` of nullable refs). */
  resolve(schema: Schema | undefined, components: Record<string, Schema>): Schema {
    let s = schema ?? {};
    for (let i = 0; i < 10; i++) {
      if (s.$ref) s = components[required(String(s.$ref).split('/').pop(), `the name in $ref ${s.$ref}`)];
      else if (Array.isArray(s.allOf) && s.allOf.length === 1) s = s.allOf[0];
      else return s;
    }
    return s;
  }
}
