import { DomainError } from '../../common/errors/domain-error';

/**
 * A position in the feed: after the event (txId, seq) in the feed's order (tx_id, seq). Both are 64-bit integers
 * kept as decimal strings. `seq` 0 stands before every event of `txId` (no event has seq 0): (xmin, 0) is "after
 * every event of the transactions below xmin", the position a short read ends at.
 */
export interface Position {
  txId: string;
  seq: string;
}

/** The feed's beginning. */
export const START: Position = { txId: '0', seq: '0' };

const MAX_INT8 = 2n ** 63n - 1n;
const DECIMAL = /^(0|[1-9]\d{0,18})$/;

/** The opaque form of a position: a cursor, the SSE `id:`. Base64url, so it never holds a newline or a colon. */
export function encodeEventCursor(p: Position): string {
  return Buffer.from(`${p.txId}.${p.seq}`).toString('base64url');
}

/**
 * A cursor back to its position; anything this API did not hand out (not canonical base64url of two decimal 64-bit
 * integers) is a 400 INVALID_CURSOR naming `field`.
 */
export function decodeEventCursor(cursor: string, field = 'cursor'): Position {
  const text = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? Buffer.from(cursor, 'base64url').toString('latin1') : '';
  const [txId, seq, ...rest] = text.split('.');
  const valid =
    rest.length === 0 &&
    seq !== undefined &&
    DECIMAL.test(txId) &&
    DECIMAL.test(seq) &&
    BigInt(txId) <= MAX_INT8 &&
    BigInt(seq) <= MAX_INT8 &&
    encodeEventCursor({ txId, seq }) === cursor;
  if (!valid)
    throw new DomainError('INVALID_CURSOR', `${field} is not a position of this feed`, [
      { field, message: 'is invalid' },
    ]);
  return { txId, seq };
}

/** -1, 0 or 1 as `a` comes before, at or after `b` in the feed's order. */
export function comparePositions(a: Position, b: Position): number {
  const tx = BigInt(a.txId) - BigInt(b.txId);
  if (tx !== 0n) return tx < 0n ? -1 : 1;
  const seq = BigInt(a.seq) - BigInt(b.seq);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

export const laterOf = (...ps: Position[]): Position => ps.reduce((a, b) => (comparePositions(a, b) >= 0 ? a : b));
