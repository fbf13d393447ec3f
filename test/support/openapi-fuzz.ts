import fc from 'fast-check';
import type { Operation, Schema, SchemaValidator } from './openapi-schema';

/** One request against one documented route, before it is sent. */
export interface FuzzRequest {
  params: Record<string, string | number>;
  query: Record<string, unknown>;
  /** undefined: no body; anything else is sent as JSON. */
  body?: unknown;
  /** Sent as is with a JSON content type, instead of `body` (malformed JSON). */
  rawBody?: string;
  /** Sent as is as application/octet-stream, instead of `body` (a route taking bytes). */
  bytes?: Buffer;
  headers: Record<string, string>;
  /** The Authorization header; null sends none. */
  auth: string | null;
}

/** A request with what the fuzzer knows of it: how it was made, and whether the document says it must be refused. */
export interface Example {
  label: string;
  request: FuzzRequest;
  /** The document makes it invalid (or it names nothing that exists): any 2xx is a failure. */
  mustRefuse: boolean;
}

/** Tokens and ids the fuzzer swaps in: other roles, another project's objects, garbage. */
export interface FuzzContext {
  validator: SchemaValidator;
  components: Record<string, Schema>;
  /** Tokens of roles that may not call the route, per access level ('user', 'admin', 'service'). */
  wrongRoleTokens: string[];
  /** Values of path parameters that name another project's objects (by parameter name). */
  foreign: Record<string, (string | number)[]>;
  /**
   * Path parameters that name no stored object (a worker id, chosen by the worker): another value that fits the
   * schema is a valid request, not one that must be refused.
   */
  freePathParams?: string[];
}

const clone = <T>(v: T): T => (v === undefined ? v : JSON.parse(JSON.stringify(v)));

/** Sets `key` as an own enumerable property even when it is `__proto__`, so JSON.stringify sends it. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

interface Slot {
  path: (string | number)[];
  schema: Schema;
  requiredInParent: boolean;
}

/** Every place in a valid body, with the schema that governs it. */
function slotsOf(
  value: unknown,
  schema: Schema,
  ctx: FuzzContext,
  path: (string | number)[] = [],
  requiredInParent = false,
): Slot[] {
  const s = ctx.validator.resolve(schema, ctx.components);
  const here: Slot = { path, schema: s, requiredInParent };
  if (Array.isArray(value)) {
    return [here, ...value.slice(0, 2).flatMap((item, i) => slotsOf(item, s.items ?? {}, ctx, [...path, i]))];
  }
  if (value && typeof value === 'object') {
    const required: string[] = s.required ?? [];
    return [
      here,
      ...Object.entries(value as Record<string, unknown>).flatMap(([k, v]) =>
        slotsOf(
          v,
          (s.properties ?? {})[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : {}),
          ctx,
          [...path, k],
          required.includes(k),
        ),
      ),
    ];
  }
  return [here];
}

function setAt(root: unknown, path: (string | number)[], value: unknown, remove = false): unknown {
  if (path.length === 0) return value;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON value walked by a path of any depth
  const parent = path.slice(0, -1).reduce<any>((o, k) => o[k], root);
  const last = path[path.length - 1];
  // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- removing the field the path names is the point
  if (remove) delete parent[last];
  else if (typeof last === 'string') setOwn(parent, last, value);
  else parent[last] = value;
  return root;
}

const ODD_VALUES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  -0.000001,
  1e-7,
  1e300,
  2 ** 53 + 2,
  '',
  'x',
  '1',
  'true',
  [],
  [1],
  {},
  { a: 1 },
  'null',
];
const odd = fc.oneof(fc.constantFrom(...ODD_VALUES), fc.jsonValue({ maxDepth: 2 }));
/** Text of every kind: unicode, control characters, NUL, lone surrogates. */
const anyText = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 40 }),
  fc.constantFrom('a\u0000b', '\ud800', '../..', '%', ' ', 'é'),
);
const hugeText = fc
  .integer({ min: 1, max: 300_000 })
  .chain((n) => fc.constantFrom('x', 'é', '\u0000', '9').map((c) => c.repeat(n)));

/** Values that break one slot's schema (or might: the validator decides what the document says). */
function breakerFor(s: Schema): fc.Arbitrary<unknown> {
  const options: fc.Arbitrary<unknown>[] = [odd];
  if (s.type === 'integer' || s.type === 'number') {
    const bounds: number[] = [];
    if (typeof s.minimum === 'number') bounds.push(s.minimum - 1, s.minimum - 0.5, s.minimum - 1e-9);
    if (typeof s.maximum === 'number') bounds.push(s.maximum + 1, s.maximum + 0.5, s.maximum * 10 + 1);
    if (s.type === 'integer') bounds.push(0.5, 1.000001, 1e21);
    options.push(
      fc.constantFrom(...bounds, -1e308, Number.MAX_SAFE_INTEGER + 2),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    );
  }
  if (s.type === 'string') {
    options.push(anyText, hugeText);
    if (typeof s.maxLength === 'number') options.push(fc.constant('y'.repeat(s.maxLength + 1)));
    if (Array.isArray(s.enum))
      options.push(
        fc.constantFrom(...s.enum.map((e: string) => `${e}x`), ...s.enum.map((e: string) => e.toUpperCase())),
      );
  }
  if (s.type === 'array') {
    options.push(fc.constant([]), fc.array(odd, { maxLength: 5 }));
    if (typeof s.maxItems === 'number' && s.maxItems <= 10_000) options.push(fc.constant('many'));
  }
  if (s.type === 'object' || s.properties)
    options.push(fc.constant('deep'), fc.dictionary(fc.string({ maxLength: 8 }), odd, { maxKeys: 4 }));
  return fc.oneof(...options);
}

/** Array slots get 'many' (maxItems + 1 copies of the valid item); object slots 'deep' (JSON nested 3,000 deep). */
function materialise(breaker: unknown, s: Schema, current: unknown): unknown {
  if (breaker === 'many' && Array.isArray(current) && current.length > 0)
    return Array.from({ length: (s.maxItems as number) + 1 }, () => clone(current[0]));
  if (breaker === 'deep') {
    let v: unknown = {};
    for (let i = 0; i < 3000; i++) v = { a: v };
    return v;
  }
  return breaker;
}

const UNKNOWN_KEYS = ['extra', 'constructor', '__proto__', 'toString', 'hasOwnProperty', 'prototype'];

/** Mutations of the body: a slot broken, a required field removed, an unknown field added, garbage instead of JSON. */
function bodyMutations(op: Operation, valid: FuzzRequest, ctx: FuzzContext): fc.Arbitrary<Example>[] {
  // Bytes (application/octet-stream) have no structure to break: such a route is probed by its query and path.
  if (op.requestBody && !op.requestBody.content['application/json']) return [];
  const schema = op.requestBody?.content['application/json']?.schema;
  const requestBodyValid = (body: unknown) => (schema ? ctx.validator.check(schema, body) === null : false);
  const example = (label: string, body: unknown): Example => ({
    label,
    request: { ...valid, body },
    mustRefuse: !requestBodyValid(body),
  });
  if (!schema) {
    // A POST without a body refuses one, except `{}` (many clients send it with every POST). GET and DELETE bodies
    // are not part of HTTP's contract: not probed.
    if (op.method !== 'POST') return [];
    const empty = (b: unknown) =>
      typeof b === 'object' && b !== null && !Array.isArray(b) && Object.keys(b).length === 0;
    return [
      fc
        .oneof(odd, fc.constant({ a: 1 }))
        .filter((b) => b !== null && b !== '')
        .map((b) => ({
          label: `body ${short(b)} on a bodyless route`,
          request: { ...valid, body: b },
          mustRefuse: !empty(b),
        })),
    ];
  }
  const slots = slotsOf(valid.body, schema, ctx);
  const broken = fc.constantFrom(...slots).chain((slot) =>
    breakerFor(slot.schema).map((breaker) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON value walked by a path of any depth
      const current = slot.path.reduce<any>((o, k) => o?.[k], valid.body);
      const value = materialise(breaker, slot.schema, current);
      return example(
        `${slot.path.join('.') || '(body)'} = ${short(value)}`,
        setAt(clone(valid.body), slot.path, value),
      );
    }),
  );
  const arbs: fc.Arbitrary<Example>[] = [broken];
  const removable = slots.filter((s) => s.requiredInParent);
  if (removable.length)
    arbs.push(
      fc
        .constantFrom(...removable)
        .map((slot) => example(`without ${slot.path.join('.')}`, setAt(clone(valid.body), slot.path, undefined, true))),
    );
  const objects = slots.filter(
    (s) => (s.schema.properties || s.schema.type === 'object') && s.schema.additionalProperties === false,
  );
  if (objects.length) {
    arbs.push(
      fc
        .tuple(
          fc.constantFrom(...objects),
          fc.oneof(fc.constantFrom(...UNKNOWN_KEYS), fc.string({ minLength: 1, maxLength: 12 })),
          odd,
        )
        .map(([slot, key, v]) => {
          const body = clone(valid.body);
          // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON value walked by a path of any depth
          const target = slot.path.reduce<any>((o, k) => o[k], body);
          setOwn(target, key, v);
          return example(`unknown field ${slot.path.join('.')}${slot.path.length ? '.' : ''}${key}`, body);
        }),
    );
  }
  arbs.push(
    fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('{', '[1,', '{"a":}', 'nul', '{"jobs": [}')).map((text) => ({
      label: `not JSON: ${short(text)}`,
      request: { ...valid, rawBody: `\u0001${text}` },
      mustRefuse: true,
    })),
  );
  arbs.push(fc.jsonValue({ maxDepth: 3 }).map((v) => example(`random JSON ${short(v)}`, v)));
  return arbs;
}

function paramValid(p: { schema: Schema }, value: unknown, ctx: FuzzContext): boolean {
  const s = ctx.validator.resolve(p.schema, ctx.components);
  if (typeof value !== 'string') return false;
  // Query and path values are text: an integer is its canonical decimal form, a boolean `true` or `false`.
  let typed: unknown = value;
  if (s.type === 'integer' || s.type === 'number') {
    if (!/^-?(0|[1-9]\d*)$/.test(value)) return false;
    typed = Number(value);
  } else if (s.type === 'boolean') {
    if (value !== 'true' && value !== 'false') return false;
    typed = value === 'true';
  }
  return ctx.validator.check(p.schema, typed) === null;
}

/** Mutations of the query: a parameter with a wrong or out-of-range value, repeated, or one the route doesn't know. */
function queryMutations(op: Operation, valid: FuzzRequest, ctx: FuzzContext): fc.Arbitrary<Example>[] {
  const params = op.parameters.filter((p) => p.in === 'query');
  const unknown = fc
    .tuple(fc.constantFrom('extra', 'constructor', '__proto__', 'limit2'), fc.string({ maxLength: 5 }))
    .map(([k, v]) => ({
      label: `unknown query ${k}`,
      request: { ...valid, query: { ...valid.query, [k]: v } },
      mustRefuse: true,
    }));
  // Routes without query parameters ignore the query string; those with some refuse unknown ones.
  if (!params.length) return [];
  const wrong = fc.constantFrom(...params).chain((p) => {
    const s = ctx.validator.resolve(p.schema, ctx.components);
    const values: fc.Arbitrary<string>[] = [
      anyText,
      fc.constantFrom('', '-1', '0', '1.5', '1e3', '0x10', ' 5', '99999999999', 'TRUE', 'null', '[]'),
    ];
    if (typeof s.maximum === 'number') values.push(fc.constant(String(s.maximum + 1)));
    if (typeof s.minimum === 'number') values.push(fc.constant(String(s.minimum - 1)));
    if (typeof s.maxLength === 'number') values.push(fc.constant('q'.repeat(s.maxLength + 1)));
    return fc.oneof(...values).map((v) => ({
      label: `query ${p.name}=${short(v)}`,
      request: { ...valid, query: { ...valid.query, [p.name]: v } },
      mustRefuse: !paramValid(p, v, ctx),
    }));
  });
  const repeated = fc.constantFrom(...params).map((p) => ({
    label: `query ${p.name} repeated`,
    request: { ...valid, query: { ...valid.query, [p.name]: ['1', '2'] } },
    mustRefuse: true,
  }));
  return [wrong, repeated, unknown];
}

/** Mutations of path parameters: odd text, non-canonical or out-of-range integers, another project's objects. */
function pathMutations(op: Operation, valid: FuzzRequest, ctx: FuzzContext): fc.Arbitrary<Example>[] {
  const params = op.parameters.filter((p) => p.in === 'path');
  if (!params.length) return [];
  return [
    fc.constantFrom(...params).chain((p) => {
      const s = ctx.validator.resolve(p.schema, ctx.components);
      // A canonical integer in range may name another object that exists (group 4 of the fixture's run): it is a valid
      // request, not a mutation, so odd text leaves those out for integer parameters.
      const canonical = (t: string) => s.type === 'integer' && /^(0|[1-9][0-9]{0,8})$/.test(t);
      const values: fc.Arbitrary<string | number>[] = [
        anyText.filter((t) => t !== '' && t !== '.' && t !== String(valid.params[p.name]) && !canonical(t)),
        fc.uuid().map(String),
        fc.constantFrom('zz', 'x'.repeat(600), 'a%00b', 'NaN'),
      ];
      if (s.type === 'integer')
        values.push(
          fc.constantFrom('01', '-1', '1.0', '1e3', '0x1', ' 1', '+1', '2147483648', '99999999999999999999', '1000000'),
        );
      const foreign = ctx.foreign[p.name] ?? [];
      if (foreign.length) values.push(fc.constantFrom(...foreign));
      const free = ctx.freePathParams?.includes(p.name) ?? false;
      return fc.oneof(...values).map((v) => ({
        label: `path ${p.name}=${short(v)}`,
        request: { ...valid, params: { ...valid.params, [p.name]: v } },
        mustRefuse: !free || !paramValid(p, String(v), ctx),
      }));
    }),
  ];
}

/** Mutations of credentials: none, garbage, the wrong role's token; and invalid `Idempotency-Key` headers. */
function headerMutations(op: Operation, valid: FuzzRequest, ctx: FuzzContext): fc.Arbitrary<Example>[] {
  const arbs: fc.Arbitrary<Example>[] = [];
  if (op.security?.length) {
    const garbage = fc.oneof(
      fc.constant(null),
      fc.constantFrom('Bearer', 'Bearer ', 'Basic abc', 'bearer x', `Bearer ${'t'.repeat(600)}`),
      fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 40 }).map((t) => `Bearer ${t}`),
    );
    const tokens = ctx.wrongRoleTokens.length
      ? fc.oneof(
          garbage,
          fc.constantFrom(...ctx.wrongRoleTokens).map((t) => `Bearer ${t}`),
        )
      : garbage;
    arbs.push(tokens.map((auth) => ({ label: `auth ${short(auth)}`, request: { ...valid, auth }, mustRefuse: true })));
  }
  if (op.parameters.some((p) => p.in === 'header' && p.name === 'Idempotency-Key')) {
    arbs.push(
      fc.constantFrom('', 'a b', 'k'.repeat(256), 'é', '\t').map((key) => ({
        label: `Idempotency-Key ${short(key)}`,
        request: { ...valid, headers: { ...valid.headers, 'Idempotency-Key': key } },
        mustRefuse: true,
      })),
    );
  }
  return arbs;
}

/** Every kind of invalid request the document allows us to build for `op`, from its valid request. */
export function invalidExamples(op: Operation, valid: FuzzRequest, ctx: FuzzContext): fc.Arbitrary<Example> {
  const arbs = [
    ...bodyMutations(op, valid, ctx),
    ...queryMutations(op, valid, ctx),
    ...pathMutations(op, valid, ctx),
    ...headerMutations(op, valid, ctx),
  ];
  if (arbs.length) return fc.oneof(...arbs);
  // Nothing to break (public routes without parameters): noise that must change nothing (an ignored query, a token).
  return fc
    .tuple(fc.string({ maxLength: 8 }), anyText, fc.option(fc.string({ unit: 'grapheme-ascii', maxLength: 20 })))
    .map(([k, v, token]) => ({
      label: `noise ${short(k)}=${short(v)} token ${short(token)}`,
      request: { ...valid, query: { ...valid.query, [`x${k}`]: v }, auth: token === null ? null : `Bearer ${token}` },
      mustRefuse: false,
    }));
}

export function short(v: unknown): string {
  const text = typeof v === 'string' ? JSON.stringify(v) : (JSON.stringify(v) ?? String(v));
  return text.length > 60 ? `${text.slice(0, 40)}…(${text.length} chars)` : text;
}
