import 'reflect-metadata';
import { DomainError } from '../../src/common/errors/domain-error';
import { decodeCursor, encodeCursor, toPage } from '../../src/common/pagination/cursor';

const b64 = (text: string) => Buffer.from(text).toString('base64url');

/** The error decodeCursor throws, or undefined when it accepts the cursor. */
const refusal = (cursor: string, shape: ('string' | 'number')[]) => {
  try {
    decodeCursor(cursor, shape);
    return undefined;
  } catch (err) {
    return err;
  }
};

describe('cursors: encode and decode', () => {
  it.each<[(string | number)[], ('string' | 'number')[]]>([
    [[0], ['number']],
    [[2_147_483_647], ['number']],
    [[-2_147_483_647], ['number']],
    [
      [3, 17],
      ['number', 'number'],
    ],
    [
      ['2024-01-01T00:00:00.000Z', '00000000-0000-0000-0000-000000000000'],
      ['string', 'string'],
    ],
    [
      ['', 'é 東京 😀 "quotes" \\ /'],
      ['string', 'string'],
    ],
    [['x'.repeat(256)], ['string']],
    [
      ['a', 1],
      ['string', 'number'],
    ],
  ])('round-trips %j', (keys, shape) => {
    const cursor = encodeCursor(keys);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]*$/); // base64url, no padding: safe in a query string as is
    expect(decodeCursor(cursor, shape)).toEqual(keys);
  });

  it('is opaque base64url of the JSON keys (what a client must treat as a black box)', () => {
    expect(encodeCursor([1, 'a'])).toBe(b64('[1,"a"]'));
  });

  it.each<[string, string, ('string' | 'number')[]]>([
    ['not base64 JSON', 'garbage', ['number']],
    ['empty', '', ['number']],
    ['JSON that is not an array', b64('{"a":1}'), ['number']],
    ['a bare number', b64('1'), ['number']],
    ['null', b64('null'), ['number']],
    ['too few keys', b64('[1]'), ['number', 'number']],
    ['too many keys', b64('[1,2,3]'), ['number', 'number']],
    ['a string where a number goes', b64('["1"]'), ['number']],
    ['a number where a string goes', b64('[1]'), ['string']],
    ['null as a key', b64('[null]'), ['number']],
    ['a fraction', b64('[1.5]'), ['number']],
    ['beyond int4', b64('[2147483648]'), ['number']],
    ['below -int4 max', b64('[-2147483648]'), ['number']],
    ['1e300', b64('[1e300]'), ['number']],
    ['a string over 256 characters', b64(JSON.stringify(['x'.repeat(257)])), ['string']],
    ['a NUL in a string', b64(JSON.stringify(['a\u0000b'])), ['string']],
    ['a lone surrogate', b64('["\\ud800"]'), ['string']],
    ['a nested array', b64('[[1]]'), ['number']],
  ])('refuses %s with INVALID_CURSOR naming cursor', (_label, cursor, shape) => {
    const err = refusal(cursor, shape);
    expect(err).toBeInstanceOf(DomainError);
    expect(err).toMatchObject({ code: 'INVALID_CURSOR', status: 400, details: [{ field: 'cursor' }] });
  });
});

describe('toPage: a page from limit + 1 rows', () => {
  const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ k: i, name: `r${i}` }));
  const page = (n: number, limit: number) =>
    toPage(
      rows(n),
      limit,
      (r) => [r.k, r.name],
      (r) => r.name,
    );

  it('a row beyond the limit: limit items, and a cursor made from the last one shown', () => {
    const p = page(4, 3);
    expect(p.items).toEqual(['r0', 'r1', 'r2']);
    expect(p.next_cursor).toBe(encodeCursor([2, 'r2']));
  });

  it.each([
    [3, 3],
    [2, 3],
    [0, 3],
  ])('%i rows with limit %i: every row, no next cursor', (n, limit) => {
    const p = page(n, limit);
    expect(p.items).toEqual(rows(n).map((r) => r.name));
    expect(p.next_cursor).toBeNull();
  });
});
