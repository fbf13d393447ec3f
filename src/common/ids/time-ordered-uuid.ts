import { randomUUID } from 'node:crypto';

/**
 * UUIDs of version 7 (RFC 9562): the first 48 bits are the Unix time in ms, the next 12 a counter within that
 * millisecond (method 1, "fixed bit-length dedicated counter"), the last 62 random. Ids made one after another
 * compare (as text, as PostgreSQL's uuid) in the order they were made, so a B-tree over them is appended to at its
 * right edge, where random ids land anywhere, each insert dirtying a leaf page of its own. The two INSERTs of a
 * 10,000-job add-jobs request with random ids (primary keys of jobs and submissions, the submissions' job_id index)
 * took 1.3–2× as long in a database of 1,000,000 jobs as in an empty one (e.g. 608 against 295 ms); with
 * time-ordered ids 1.1–1.4× (350 against 306 ms), on the same loaded 2-core machine.
 *
 * Within one process ids are strictly increasing: past 4,096 ids in a millisecond, or when the clock steps back, the
 * time field runs ahead of the clock until the clock catches up. Across processes they are ordered to the
 * millisecond, which is all an index needs.
 */
let lastMs = 0;
let counter = 0;

export function timeOrderedUuid(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    counter = 0;
  } else if (++counter > 0xfff) {
    lastMs++;
    counter = 0;
  }
  const time = lastMs.toString(16).padStart(12, '0');
  // randomUUID's last 17 characters: the variant and 62 random bits (xxxx-xxxxxxxxxxxx, the variant first).
  const random = randomUUID().slice(19);
  return `${time.slice(0, 8)}-${time.slice(8)}-7${counter.toString(16).padStart(3, '0')}-${random}`;
}
