import { DomainError } from '../../src/common/errors/domain-error';
import {
  comparePositions,
  decodeEventCursor,
  encodeEventCursor,
  laterOf,
  START,
} from '../../src/modules/events/event-cursor';

describe('event feed cursors', () => {
  const refused = (cursor: string, field = 'cursor') => {
    try {
      decodeEventCursor(cursor, field);
    } catch (err) {
      expect(err).toBeInstanceOf(DomainError);
      expect((err as DomainError).code).toBe('INVALID_CURSOR');
      expect((err as DomainError).details).toEqual([{ field, message: 'is invalid' }]);
      return;
    }
    throw new Error(`${JSON.stringify(cursor)} was accepted`);
  };

  it('round-trips positions, 64-bit values included, as opaque base64url', () => {
    for (const p of [
      START,
      { txId: '751', seq: '0' },
      { txId: '4294967296123', seq: '98765' },
      { txId: '9223372036854775807', seq: '9223372036854775807' },
    ]) {
      const c = encodeEventCursor(p);
      expect(c).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(decodeEventCursor(c)).toEqual(p);
    }
  });

  it('refuses what it did not hand out, naming the field', () => {
    const b64 = (s: string) => Buffer.from(s).toString('base64url');
    refused('');
    refused('not a cursor');
    refused(b64('12'));
    refused(b64('12.'));
    refused(b64('.12'));
    refused(b64('1.2.3'));
    refused(b64('-1.2'));
    refused(b64('01.2'), 'Last-Event-ID'); // not canonical
    refused(b64('1.2 '));
    refused(b64('1e3.2'));
    refused(b64('9223372036854775808.1')); // past int8
    refused(b64('1.99999999999999999999'));
    refused(`${encodeEventCursor({ txId: '5', seq: '6' })}=`); // padding: another spelling of the same bytes
    refused('x'.repeat(65));
    refused(b64('5:6'));
  });

  it('orders positions by transaction, then seq, as 64-bit integers (not as text)', () => {
    expect(comparePositions({ txId: '9', seq: '100' }, { txId: '10', seq: '1' })).toBe(-1);
    expect(comparePositions({ txId: '10', seq: '2' }, { txId: '10', seq: '10' })).toBe(-1);
    expect(comparePositions({ txId: '10', seq: '10' }, { txId: '10', seq: '10' })).toBe(0);
    expect(comparePositions({ txId: '9223372036854775807', seq: '1' }, { txId: '9223372036854775806', seq: '9' })).toBe(
      1,
    );
    expect(laterOf({ txId: '7', seq: '3' }, { txId: '8', seq: '0' }, START)).toEqual({ txId: '8', seq: '0' });
  });
});
