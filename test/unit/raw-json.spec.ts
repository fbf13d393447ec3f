import { RawJson, ResponseBufferPool, serializeWithRaw } from '../../src/common/json/raw-json';

describe('RawJson splicing', () => {
  it('splices raw JSON text where RawJson values stand, giving what JSON.stringify of the parsed values gives', () => {
    const value = {
      a: new RawJson('{"x": 1, "nested": {"y": [1, 2, "three"]}}'),
      list: [new RawJson('[1,2]'), null, new RawJson('"s"'), new RawJson('{"city":"Zürich 東京 🚀"}')],
      text: 'quote " and \u0000 control, ünïcödé 東京 🚀',
      forged: '\u0000deadbeef:0',
    };
    const spliced = serializeWithRaw(value).toString('utf8');
    expect(JSON.parse(spliced)).toEqual(JSON.parse(JSON.stringify(value)));
    expect(JSON.parse(spliced).forged).toBe('\u0000deadbeef:0');
  });

  it('splices in order: many texts, Buffers and strings, nested, at the top level, and none at all', () => {
    const texts = Array.from({ length: 500 }, (_, i) => JSON.stringify({ i, s: 'é'.repeat(i % 7) }));
    const value = {
      items: texts.map((t, i) => ({ i, doc: new RawJson(i % 2 ? Buffer.from(t, 'utf8') : t), other: [i] })),
    };
    const spliced = serializeWithRaw(value).toString('utf8');
    expect(JSON.parse(spliced)).toEqual(JSON.parse(JSON.stringify(value)));
    expect(serializeWithRaw(new RawJson('[1, 2]')).toString('utf8')).toBe('[1, 2]');
    expect(serializeWithRaw({ plain: 'ü' }).toString('utf8')).toBe('{"plain":"ü"}');
  });

  it('behaves as the parsed value under a plain JSON.stringify', () => {
    expect(JSON.stringify({ v: new RawJson('{"k":true}') })).toBe('{"v":{"k":true}}');
  });
});

describe('ResponseBufferPool', () => {
  it('hands a released buffer out again for a response that fits, and never the same one twice at once', () => {
    const pool = new ResponseBufferPool();
    const a = serializeWithRaw({ big: 'x'.repeat(300_000) }, (n) => pool.acquire(n));
    expect(JSON.parse(a.toString('utf8')).big).toHaveLength(300_000);
    const b = pool.acquire(300_000);
    expect(b.buffer).not.toBe(a.buffer);
    pool.release(a);
    const c = serializeWithRaw({ big: 'y'.repeat(290_000) }, (n) => pool.acquire(n));
    expect(c.buffer).toBe(a.buffer);
    expect(JSON.parse(c.toString('utf8')).big).toBe('y'.repeat(290_000));
  });

  it('keeps small buffers out and at most MAX_IDLE_BYTES idle', () => {
    const pool = new ResponseBufferPool();
    pool.release(pool.acquire(1000));
    expect(pool.idleBytes).toBe(0);
    const size = 20 << 20;
    const bufs = [1, 2, 3, 4].map(() => pool.acquire(size));
    for (const b of bufs) pool.release(b);
    expect(pool.idleBytes).toBeLessThanOrEqual(ResponseBufferPool.MAX_IDLE_BYTES);
    expect(pool.idleBytes).toBe(3 * size);
  });
});
