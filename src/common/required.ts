/**
 * The value, known to be there (a key just set, a row just written, an option always given): a missing one is a
 * bug, thrown as an Error naming what was missing rather than a TypeError further on. Replaces `value!`.
 */
export function required<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw new Error(`${what}: missing`);
  return value;
}
