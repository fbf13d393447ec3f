import Ajv, { type ErrorObject } from 'ajv';
import { isMap, isNode, isPair, isScalar, LineCounter, parseDocument, type Document, type Node } from 'yaml';
import { buildRequest, semanticErrors, type BuiltRun, type Located } from './run-file-build';

/** An error in a run file: where (1-based line and column) and what. */
export interface FileError {
  line: number;
  col: number;
  message: string;
}

export type ParseResult = { ok: true; run: BuiltRun } | { ok: false; errors: FileError[] };

/**
 * A run file read, checked and turned into the API's run submission. Every error is collected (YAML syntax first:
 * with broken syntax nothing else can be located), each with its line and column; nothing here talks to a server.
 * `schema` is the JSON Schema the server publishes (GET /api/v1/schemas/run-file).
 */
export function parseRunFile(text: string, schema: object): ParseResult {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const at = (offset: number) => lines.linePos(offset);
  if (doc.errors.length > 0) {
    return {
      ok: false,
      errors: doc.errors.map((e) => ({ ...at(e.pos[0]), message: e.message.split('\n')[0] })),
    };
  }
  const value: unknown = doc.toJS({ maxAliasCount: 1000 }) ?? {};
  const validate = new Ajv({ allErrors: true, strict: false, verbose: true }).compile(schema);
  const errors: FileError[] = [];
  if (!validate(value)) {
    for (const e of validate.errors ?? []) errors.push(schemaError(doc, at, e));
  }
  const locate = (path: (string | number)[], key = false): { line: number; col: number } =>
    at(offsetOf(doc, path, key));
  for (const e of semanticErrors(value)) errors.push(locatedError(locate, e));
  if (errors.length > 0) return { ok: false, errors: sortErrors(dedupe(errors)) };
  return { ok: true, run: buildRequest(value as Record<string, unknown>) };
}

/** `file:line:col: message`, one line each, the format editors and compilers use. */
export function formatErrors(file: string, errors: FileError[]): string {
  return errors.map((e) => `${file}:${e.line}:${e.col}: ${e.message}\n`).join('');
}

function locatedError(locate: (p: (string | number)[], key?: boolean) => { line: number; col: number }, e: Located) {
  return { ...locate(e.path, e.atKey), message: `${dotted(e.path)}${e.path.length ? ': ' : ''}${e.message}` };
}

function schemaError(doc: Document, at: (o: number) => { line: number; col: number }, e: ErrorObject): FileError {
  const path = pointer(e.instancePath);
  const p = e.params as Record<string, unknown>;
  let where = path;
  let atKey = false;
  let message: string;
  switch (e.keyword) {
    case 'additionalProperties':
      where = [...path, String(p.additionalProperty)];
      atKey = true;
      message = `unknown key "${String(p.additionalProperty)}"${known(e)}`;
      break;
    case 'propertyNames':
      where = [...path, String(p.propertyName)];
      atKey = true;
      message = `"${String(p.propertyName)}" is not a valid name (letters, digits and _, not starting with a digit)`;
      break;
    case 'required':
      message = `missing "${String(p.missingProperty)}"`;
      break;
    case 'type':
      message = `must be ${String(p.type).split(',').map(article).join(' or ')}`;
      break;
    case 'pattern':
      message = patternMessage(String(p.pattern));
      break;
    case 'enum':
      message = `must be one of: ${(p.allowedValues as unknown[]).map(String).join(', ')}`;
      break;
    default:
      message = e.message ?? e.keyword;
  }
  const label = dotted(where);
  return { ...at(offsetOf(doc, where, atKey)), message: `${label}${label ? ': ' : ''}${message}` };
}

/** The keys a mapping accepts, named in an unknown key's error: the schema says them. */
function known(e: ErrorObject): string {
  const props = (e.parentSchema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? ` (known: ${Object.keys(props).join(', ')})` : '';
}

const article = (t: string) =>
  t === 'integer' ? 'an integer' : t === 'object' ? 'a mapping' : t === 'array' ? 'a list' : `a ${t}`;

function patternMessage(pattern: string): string {
  if (pattern.includes('[MmGgTt]')) return 'must be a size with a unit, like 512MB or 4GB';
  if (pattern.includes('[smhd]')) return 'must be seconds, or a number with s, m, h or d (like 10m)';
  if (pattern.startsWith('^[a-z0-9][a-z0-9-]'))
    return 'must be lowercase letters, digits and -, starting with a letter or digit (at most 63)';
  return 'must be letters, digits, _, . and -, starting with a letter or digit (at most 128)';
}

/** The offset of the node at `path` (its key's, with `key`), or of the nearest ancestor that exists. */
function offsetOf(doc: Document, path: (string | number)[], key: boolean): number {
  for (let n = path.length; n >= 0; n--) {
    const sub = path.slice(0, n);
    if (key && n === path.length && n > 0) {
      const parent = sub.length > 1 ? doc.getIn(sub.slice(0, -1), true) : doc.contents;
      if (isMap(parent)) {
        const pair = parent.items.find((i) => isPair(i) && isScalar(i.key) && String(i.key.value) === sub[n - 1]);
        const k = pair?.key;
        if (isNode(k) && k.range) return k.range[0];
      }
      continue;
    }
    const node = (n === 0 ? doc.contents : doc.getIn(sub, true)) as Node | null | undefined;
    if (isNode(node) && node.range) return node.range[0];
  }
  return 0;
}

function pointer(p: string): (string | number)[] {
  if (!p) return [];
  return p
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

/** `groups[1].jobs[0].resources.memory`: where, as a person reads it. */
export function dotted(path: (string | number)[]): string {
  return path.map((s, i) => (typeof s === 'number' ? `[${s}]` : i === 0 ? s : `.${s}`)).join('');
}

function dedupe(errors: FileError[]): FileError[] {
  const seen = new Set<string>();
  return errors.filter((e) => {
    const k = `${e.line}:${e.col}:${e.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

const sortErrors = (errors: FileError[]) => errors.sort((a, b) => a.line - b.line || a.col - b.col);
