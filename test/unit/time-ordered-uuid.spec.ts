import { timeOrderedUuid } from '../../src/common/ids/time-ordered-uuid';
import { UUID_PATTERN } from '../../src/common/validation/params';

describe('timeOrderedUuid: UUIDs of version 7', () => {
  it('is a UUID of version 7 and the RFC variant, its first 48 bits the time in ms', () => {
    const before = Date.now();
    const id = timeOrderedUuid();
    const after = Date.now();
    expect(id).toMatch(UUID_PATTERN);
    expect(id[14]).toBe('7');
    expect('89ab').toContain(id[19]);
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    // The time field may run ahead of the clock by the ids of a crowded millisecond (4,096 a ms), never behind it.
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after + 100);
  });

  const increasing = (ids: string[]) => {
    expect(new Set(ids).size).toBe(ids.length);
    for (let i = 1; i < ids.length; i++) if (!(ids[i - 1] < ids[i])) throw new Error(`${ids[i - 1]} ≥ ${ids[i]}`);
  };

  it('ids made one after another increase, as text and so as PostgreSQL uuids', () => {
    increasing(Array.from({ length: 50_000 }, () => timeOrderedUuid()));
  });

  it('they still increase past 4,096 in one millisecond, and when the clock steps back', () => {
    const now = jest.spyOn(Date, 'now').mockReturnValue(Date.now() + 1000);
    try {
      const crowded = Array.from({ length: 10_000 }, () => timeOrderedUuid());
      now.mockReturnValue(Date.now() - 60_000);
      increasing([...crowded, ...Array.from({ length: 100 }, () => timeOrderedUuid())]);
    } finally {
      now.mockRestore();
    }
  });
});
