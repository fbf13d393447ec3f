import { DomainError } from '../errors/domain-error';

/** Arrays and objects nested deeper than this (the body itself counts as one) are refused before validation. */
export const MAX_JSON_DEPTH = 64;

/**
 * Keys refused anywhere in a body or query, free-form maps (`attributes`, `env`) included: the validation pipe
 * would silently drop them, and code that copies or merges user objects could be steered by them. Every name
 * Object.prototype has (`toString`, `hasOwnProperty`, `valueOf`...) is one: class-transformer skips a key that
 * names a function of the instance it fills, so the whitelist never saw `{"toString": 1}`.
 */
export const RESERVED_KEYS: ReadonlySet<string> = new Set([
  ...Object.getOwnPropertyNames(Object.prototype),
  'prototype',
]);

/** NUL (which PostgreSQL text and jsonb cannot hold) or a UTF-16 surrogate without its pair (not Unicode at all). */
const UNSTORABLE = /\0|[\ud800-\udbff](?![\udc00-\udfff])|(?:^|[^\ud800-\udbff])[\udc00-\udfff]/;
/** A cheap first look: most strings hold neither NUL nor any surrogate. */
const SUSPECT = /[\0\ud800-\udfff]/;

/** Why a string can't be stored as text, or undefined when it can. */
export function unstorableText(s: string): string | undefined {
  if (!SUSPECT.test(s)) return undefined;
  const m = UNSTORABLE.exec(s);
  if (!m) return undefined;
  return m[0] === '\u0000'
    ? 'must not contain NUL (\\u0000) characters'
    : 'must be valid Unicode text (a lone surrogate was found)';
}

export interface FieldProblem {
  field: string;
  message: string;
}

const MAX_PROBLEMS = 20;

/** A value met in the walk; its path is spelled out only when a problem is found there. */
interface Visit {
  value: unknown;
  parent: Visit | undefined;
  key: string | number | undefined;
  depth: number;
}

/** `a.b[3].c`, as the validation pipe names fields; a key that is not a plain name is quoted: `env["a b"]`. */
function pathOf(visit: Visit, root: string, lastKey?: string): string {
  const keys: (string | number)[] = lastKey === undefined ? [] : [lastKey];
  for (let v: Visit | undefined = visit; v?.key !== undefined; v = v.parent) keys.push(v.key);
  let path = root;
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i];
    if (typeof key === 'number') path = `${path}[${key}]`;
    else if (/^[A-Za-z0-9_$-]+$/.test(key)) path = path ? `${path}.${key}` : key;
    else path = `${path}[${JSON.stringify(key)}]`;
  }
  return path || 'body';
}

/**
 * Every problem no validator should have to meet, in one iterative walk (a deep value can't overflow the stack):
 * nesting deeper than MAX_JSON_DEPTH, text PostgreSQL can't store (in values and in keys), reserved keys, and
 * non-finite numbers (JSON's `1e400` parses to Infinity, which JSON.stringify would store as null).
 */
export function findInputProblems(value: unknown, root = ''): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const stack: Visit[] = [{ value, parent: undefined, key: undefined, depth: 1 }];
  while (problems.length < MAX_PROBLEMS) {
    const visit = stack.pop();
    if (!visit) break;
    const v = visit.value;
    if (typeof v === 'string') {
      const why = unstorableText(v);
      if (why) problems.push({ field: pathOf(visit, root), message: why });
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) problems.push({ field: pathOf(visit, root), message: 'must be a finite number' });
    } else if (v !== null && typeof v === 'object') {
      if (visit.depth > MAX_JSON_DEPTH) {
        problems.push({
          field: pathOf(visit, root),
          message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`,
        });
        continue;
      }
      const depth = visit.depth + 1;
      // Pushed in reverse so problems come out in document order.
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], parent: visit, key: i, depth });
      } else {
        const keys = Object.keys(v);
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i];
          const why = unstorableText(key);
          if (why) problems.push({ field: pathOf(visit, root, key), message: `key ${why}` });
          else if (RESERVED_KEYS.has(key))
            problems.push({ field: pathOf(visit, root, key), message: 'should not exist' });
          else stack.push({ value: (v as Record<string, unknown>)[key], parent: visit, key, depth });
        }
      }
    }
  }
  return problems;
}

/** Throws VALIDATION_FAILED naming each problem field, as the validation pipe does. */
export function assertStorableInput(value: unknown, root = ''): void {
  const problems = findInputProblems(value, root);
  if (problems.length > 0) {
    throw new DomainError('VALIDATION_FAILED', problems.map((p) => `${p.field} ${p.message}`).join('; '), problems);
  }
}
