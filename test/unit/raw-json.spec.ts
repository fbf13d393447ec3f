import { RawJson, serializeWithRaw } from '../../src/common/json/raw-json';

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

  it('behaves as the parsed value under a plain JSON.stringify', () => {
    expect(JSON.stringify({ v: new RawJson('{"k":true}') })).toBe('{"v":{"k":true}}');
  });
});
