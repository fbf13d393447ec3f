import { DomainError } from '../errors/domain-error';

/** Arrays and objects nested deeper than this (the body itself counts as one) are refused before validation. */
export const MAX_JSON_DEPTH = 64;

/**
 * Keys refused anywhere in a body or query, free-form maps (`attributes`, `env`) included: the validation pipe
 * would silently drop them, and code that copies or merges user objects could be steered by them.
 */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** NUL (which PostgreSQL text and jsonb cannot hold) or a UTF-16 surrogate without its pair (not Unicode at all). */
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?:^|[^\ud800-\udbff])[\udc00-\udfff]/;

/** Why a string can't be stored as text, or undefined when it can. */
export function unstorableText(s: string): string | undefined {
  const m = UNSTORABLE.exec(s);
  if (!m) return undefined;
  return m[0] === '\u0000' ? 'must not contain NUL (\\u0000) characters' : 'must be valid Unicode text (a lone surrogate was found)';
}

export interface FieldProblem {
  field: string;
  message: string;
}

const MAX_PROBLEMS = 20;

/** `a.b[3].c`, as the validation pipe names fields; a key that is not a plain name is quoted: `env["a b"]`. */
function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  if (/^[A-Za-z0-9_$-]+$/.test(key)) return parent ? `${parent}.${key}` : key;
  return `${parent}[${JSON.stringify(key)}]`;
}

/**
 * Every problem no validator should have to meet, in one iterative walk (a deep value can't overflow the stack):
 * nesting deeper than MAX_JSON_DEPTH, text PostgreSQL can't store (in values and in keys), reserved keys, and
 * non-finite numbers (JSON's `1e400` parses to Infinity, which JSON.stringify would store as null).
 */
export function findInputProblems(value: unknown, root = ''): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path: root, depth: 1 }];
  while (stack.length > 0 && problems.length < MAX_PROBLEMS) {
    const { value: v, path, depth } = stack.pop()!;
    const field = path || 'body';
    if (typeof v === 'string') {
      const why = unstorableText(v);
      if (why) problems.push({ field, message: why });
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) problems.push({ field, message: 'must be a finite number' });
    } else if (v !== null && typeof v === 'object') {
      if (depth > MAX_JSON_DEPTH) {
        problems.push({ field, message: `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` });
        continue;
      }
      const entries: [string | number, unknown][] = Array.isArray(v) ? v.map((item, i) => [i, item]) : Object.entries(v);
      // Pushed in reverse so problems come out in document order.
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, item] = entries[i];
        const itemPath = childPath(path, key);
        if (typeof key === 'string') {
          const why = unstorableText(key);
          if (why) {
            problems.push({ field: itemPath, message: `key ${why}` });
            continue;
          }
          if (RESERVED_KEYS.has(key)) {
            problems.push({ field: itemPath, message: 'should not exist' });
            continue;
          }
        }
        stack.push({ value: item, path: itemPath, depth: depth + 1 });
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
