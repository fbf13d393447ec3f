import { useEffect, useState } from 'preact/hooks';

/** One page of a keyset-paginated list, as the API returns it. */
export interface KeysetPage<T> {
  items: T[];
  next_cursor?: string | null;
}

/**
 * A keyset-paginated list read one page at a time: the first page whenever `deps` change, the next on `more()`.
 * `next` is undefined while the first page loads and null once the list has no more.
 */
export function useKeysetPages<T>(fetchPage: (cursor?: string) => Promise<KeysetPage<T>>, deps: unknown[]) {
  const [items, setItems] = useState<T[]>([]);
  const [next, setNext] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>();
  const load = (cursor?: string) =>
    fetchPage(cursor).then((page) => {
      setItems((old) => (cursor ? [...old, ...page.items] : page.items));
      setNext(page.next_cursor ?? null);
    }, setError);
  useEffect(() => {
    setItems([]);
    setNext(undefined);
    setError(undefined);
    void load();
  }, deps);
  return { items, next, error, more: () => next && load(next), refresh: () => load() };
}
