import { RawJson, stringifyWithRaw } from '../../src/common/json/raw-json';

describe('RawJson splicing', () => {
  it('splices raw JSON text where RawJson values stand, giving what JSON.stringify of the parsed values gives', () => {
    const value = {
      a: new RawJson('{"x": 1, "nested": {"y": [1, 2, "three"]}}'),
      list: [new RawJson('[1,2]'), null, new RawJson('"s"')],
      text: 'quote " and \u0000 control',
      forged: '\u0000deadbeef:0',
    };
    const spliced = stringifyWithRaw(value);
    expect(JSON.parse(spliced)).toEqual(JSON.parse(JSON.stringify(value)));
    expect(JSON.parse(spliced).forged).toBe('\u0000deadbeef:0');
  });

  it('behaves as the parsed value under a plain JSON.stringify', () => {
    expect(JSON.stringify({ v: new RawJson('{"k":true}') })).toBe('{"v":{"k":true}}');
  });
});
