import { unwrap, type Session } from './api';
import { readSse } from './sse';
import { required } from '../common/required';

type EventType = 'run.status' | 'job.status' | 'group.status' | 'group.cancelled' | 'project.budget_exceeded';

/**
 * Calls `refresh` at once, then again after each burst of events from the project's feed (coalesced), and every
 * `fallbackMs` in case the stream dropped something; until `refresh` says it is done or `signal` aborts. The feed
 * is followed as Server-Sent Events, reconnecting with Last-Event-ID when the stream ends.
 */
export async function watchFeed(
  s: Session,
  project: string,
  filter: { runId?: string; types: EventType[] },
  refresh: () => Promise<boolean>,
  signal: AbortSignal,
  fallbackMs = 5000,
): Promise<void> {
  const stop = new AbortController();
  const abort = () => stop.abort();
  signal.addEventListener('abort', abort);
  let dirty = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    dirty = true;
    wake?.();
  };
  const reader = follow(s, project, filter, poke, stop.signal);
  let failure: unknown;
  reader.done.catch((err: unknown) => {
    failure = err;
    poke();
  });
  try {
    // The stream opens first, so that no change between the first read and the stream's start is missed.
    await reader.opened;
    for (;;) {
      if (stop.signal.aborted) return;
      if (failure) throw failure;
      dirty = false;
      if (await refresh()) return;
      if (!dirty)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, fallbackMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
          stop.signal.addEventListener('abort', () => wake?.(), { once: true });
        });
      wake = undefined;
      // Events come in bursts (a job's claim, start and end; many jobs at once): one refresh for a burst.
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    signal.removeEventListener('abort', abort);
    stop.abort();
    await reader.done.catch(() => undefined);
  }
}

function follow(
  s: Session,
  project: string,
  filter: { runId?: string; types: EventType[] },
  onEvent: () => void,
  signal: AbortSignal,
): { opened: Promise<void>; done: Promise<void> } {
  let opened!: () => void;
  const openedP = new Promise<void>((r) => (opened = r));
  const done = (async () => {
    let lastId: string | undefined;
    while (!signal.aborted) {
      let res;
      try {
        res = await s.api.GET('/api/v1/projects/{project}/events', {
          params: {
            path: { project },
            query: { ...(filter.runId ? { run_id: filter.runId } : {}), type: filter.types.join(',') },
            header: lastId ? { 'Last-Event-ID': lastId } : {},
          },
          headers: { Accept: 'text/event-stream' },
          parseAs: 'stream',
          signal,
        });
      } catch {
        // Unreachable for now: the periodic refresh says so if it lasts; try the stream again after a pause.
        opened();
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      opened();
      // A refusal (a run deleted, a token revoked) ends the watch with the server's message.
      if (!res.response.ok || !res.data) await unwrap(Promise.resolve(res), s.url);
      try {
        for await (const ev of readSse(required(res.data, 'the event stream'))) {
          if (ev.id) lastId = ev.id;
          onEvent();
        }
      } catch {
        // The stream dropped: reconnect from the last event seen.
      }
      if (!signal.aborted) await new Promise((r) => setTimeout(r, 200));
    }
    opened();
  })();
  return { opened: openedP, done };
}

/** An AbortSignal aborted by Ctrl-C (SIGINT) or SIGTERM, and whether that happened. */
export function interruptSignal(): { signal: AbortSignal; interrupted: () => boolean; dispose: () => void } {
  const c = new AbortController();
  const on = () => c.abort();
  process.once('SIGINT', on);
  process.once('SIGTERM', on);
  return {
    signal: c.signal,
    interrupted: () => c.signal.aborted,
    dispose: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}
