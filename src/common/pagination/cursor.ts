import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { DomainError } from '../errors/domain-error';
import { unstorableText } from '../validation/input-guard';
import { ToStrictInt } from '../validation/validators';

/** Longer than any cursor this API hands out; a longer one is refused (400 naming `cursor`) before it is decoded. */
export const MAX_CURSOR_LENGTH = 1024;

/** `limit` and `cursor` of every list route. */
export class PageQueryDto {
  @ApiPropertyOptional({
    type: 'integer',
    description: 'Items per page: default 20, at most 100.',
    minimum: 1,
    maximum: 100,
    default: 20,
  })
  @IsOptional()
  @ToStrictInt()
  @IsInt()
  @Min(1)
  @Max(100)
  limit: number = 20;

  @ApiPropertyOptional({
    description: "The previous page's next_cursor (opaque; at most 1,024 characters).",
    maxLength: 1024,
  })
  @IsOptional()
  @IsString()
  @MaxLength(MAX_CURSOR_LENGTH)
  cursor?: string;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** Cursors are the keyset of the last item, opaque to clients; they never expire because they hold no state. */
export function encodeCursor(keys: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(keys)).toString('base64url');
}

export function decodeCursor(cursor: string, shape: ('string' | 'number')[]): (string | number)[] {
  let keys: unknown;
  try {
    keys = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalid();
  }
  if (
    !Array.isArray(keys) ||
    keys.length !== shape.length ||
    keys.some((k, i) => typeof k !== shape[i] || !storableKey(k))
  )
    throw invalid();
  return keys as (string | number)[];
}

/** Keys go to SQL as parameters: numeric keys are int4 columns, string keys text that PostgreSQL can hold. */
const storableKey = (k: unknown) =>
  typeof k === 'number'
    ? Number.isInteger(k) && Math.abs(k) <= 2_147_483_647
    : typeof k === 'string' && k.length <= 256 && unstorableText(k) === undefined;

const invalid = () =>
  new DomainError('INVALID_CURSOR', 'cursor is not a cursor of this list', [
    { field: 'cursor', message: 'is invalid' },
  ]);

/** Builds a page from `limit + 1` fetched rows. */
export function toPage<R, T>(
  rows: R[],
  limit: number,
  keysOf: (row: R) => (string | number)[],
  map: (row: R) => T,
): Page<T> {
  const more = rows.length > limit;
  const shown = more ? rows.slice(0, limit) : rows;
  return { items: shown.map(map), next_cursor: more ? encodeCursor(keysOf(shown[shown.length - 1])) : null };
}
