import type { SubmissionStatus } from './vocabulary';

/**
 * Vocabulary words as SQL constants, for the few predicates the planner must see as constants rather than
 * parameters: a partial index (`WHERE status = 'submitted'`) is used only when the query's predicate implies the
 * index's at plan time, which a parameter of a prepared statement's generic plan never does; and entity CHECKs.
 * Everywhere else statuses go to SQL as parameters. Only words of the vocabulary (lower-case, underscores) pass.
 */
export function sqlWords(words: readonly string[]): string {
  return words
    .map((w) => {
      if (!/^[a-z_]+$/.test(w)) throw new Error(`not a vocabulary word: ${w}`);
      return `'${w}'`;
    })
    .join(', ');
}

/** `column IN (...)` over vocabulary words (a single word reads as `=`, as PostgreSQL itself rewrites it). */
export function sqlIn(column: string, words: readonly SubmissionStatus[] | readonly string[]): string {
  return words.length === 1 ? `${column} = ${sqlWords(words)}` : `${column} IN (${sqlWords(words)})`;
}
