import 'reflect-metadata';
import { validateSync } from 'class-validator';
import { bodyParserError, overflowingField } from '../../src/common/http/raw-request';
import { findInputProblems, MAX_JSON_DEPTH, unstorableText } from '../../src/common/validation/input-guard';
import { IsFixedPoint, isCalendarDate } from '../../src/common/validation/validators';

describe('input guard (unit)', () => {
  it('tells storable text from NUL and lone surrogates, pairs included', () => {
    for (const ok of ['', 'plain', 'emoji 😀', '\ud83d\ude00', 'tab\tand\nnewline', '\u0001', '\uffff'])
      expect(unstorableText(ok)).toBeUndefined();
    for (const bad of [
      '\u0000',
      'a\u0000',
      '\ud800',
      'x\ud800',
      '\ud800x',
      '\udc00',
      'x\udc00y',
      '\ude00\ud83d',
      '😀\ud83d',
    ])
      expect(unstorableText(bad)).toBeDefined();
  });

  it('walks a million levels without recursion, naming the first level past the limit', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    const problems = findInputProblems({ a: deep });
    expect(problems).toEqual([
      { field: `a${'[0]'.repeat(MAX_JSON_DEPTH - 1)}`, message: expect.stringContaining('deeper than 64') },
    ]);
    let ok: unknown = 1;
    for (let i = 0; i < MAX_JSON_DEPTH - 1; i++) ok = { k: ok };
    expect(findInputProblems(ok)).toEqual([]);
  });

  it('names reserved keys, bad keys and non-finite numbers by path, in document order, at most 20', () => {
    const value = JSON.parse('{"a":[1,{"__proto__":{"x":1}}],"b":{"constructor":1,"c d":"\\u0000"},"n":1e400}');
    expect(findInputProblems(value)).toEqual([
      { field: 'a[1].__proto__', message: 'should not exist' },
      { field: 'b.constructor', message: 'should not exist' },
      { field: 'b["c d"]', message: expect.stringContaining('NUL') },
      { field: 'n', message: 'must be a finite number' },
    ]);
    expect(findInputProblems(Array.from({ length: 100 }, () => '\u0000'))).toHaveLength(20);
  });

  it("refuses keys named like Object.prototype's members (class-transformer drops them before the whitelist)", () => {
    const value = JSON.parse('{"toString":1,"spec":{"hasOwnProperty":"x","valueOf":[]},"ok":{"toStrung":1}}');
    expect(
      findInputProblems(value)
        .map((p) => p.field)
        .sort(),
    ).toEqual(['spec.hasOwnProperty', 'spec.valueOf', 'toString']);
  });

  it('judges numbers by value against a column scale', () => {
    class Money {
      @IsFixedPoint(6)
      v!: number;
    }
    const valid = (v: unknown) => validateSync(Object.assign(new Money(), { v })).length === 0;
    for (const v of [0, 1, 0.1, 0.000001, 1.5e-5, 123456.789012, 999_999_999_999.999]) expect(valid(v)).toBe(true);
    for (const v of [1e-7, 1.5e-7, 0.1 + 0.2, Infinity, NaN, 1e21, '1']) expect(valid(v)).toBe(false);
  });

  it('knows the calendar', () => {
    for (const d of ['2024-02-29', '2000-02-29', '0001-01-01', '9999-12-31', '2023-04-30'])
      expect(isCalendarDate(d)).toBe(true);
    for (const d of [
      '2024-02-30',
      '2023-02-29',
      '1900-02-29',
      '2024-04-31',
      '2024-00-10',
      '2024-13-01',
      '0000-01-01',
      '2024-1-1',
      '2024-01-01T00:00',
      20240101,
    ]) {
      expect(isCalendarDate(d)).toBe(false);
    }
  });

  it('names what overflowed a request head', () => {
    const b = (s: string) => Buffer.from(s, 'latin1');
    expect(overflowingField(b(`GET /x?limit=5&cursor=${'a'.repeat(1000)}`))).toBe('cursor');
    expect(overflowingField(b(`GET /x?cursor=${'a'.repeat(1000)}&limit=5 HTTP/1.1\r\nHost: x\r\n`))).toBe('cursor');
    expect(overflowingField(b(`GET /${'p'.repeat(1000)}`))).toBe('path');
    expect(overflowingField(b(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(1000)}`))).toBe('x-big');
    expect(overflowingField(b('a'.repeat(1000)))).toBe('headers');
    expect(overflowingField(undefined)).toBe('headers');
  });

  it('shapes what reading a body met naming body (413 keeps its status; other errors are left alone)', () => {
    const shaped = (e: object) => {
      const d = bodyParserError(e);
      return d && { status: d.status, code: d.code, details: d.details };
    };
    expect(shaped({ code: 'FST_ERR_CTP_BODY_TOO_LARGE', statusCode: 413 })).toEqual({
      status: 413,
      code: 'PAYLOAD_TOO_LARGE',
      details: [{ field: 'body', message: 'is too large' }],
    });
    expect(shaped({ code: 'FST_ERR_CTP_INVALID_CONTENT_LENGTH', statusCode: 400 })).toEqual({
      status: 400,
      code: 'VALIDATION_FAILED',
      details: [{ field: 'body', message: 'could not be read' }],
    });
    expect(shaped({ code: 'Z_DATA_ERROR', errno: -3 })).toMatchObject({ status: 400, details: [{ field: 'body' }] });
    expect(shaped({ code: 'ECONNRESET' })).toBeUndefined();
    expect(shaped(new Error('x'))).toBeUndefined();
  });
});
