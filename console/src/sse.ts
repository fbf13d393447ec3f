/**
 * Server-Sent Events over fetch: EventSource cannot send an Authorization header. Follows `url`, reconnecting with
 * Last-Event-ID after a dropped connection, until `stop()` or an `end` event; a refused request (401/403/404) stops
 * it and is reported through `onError`.
 */
export interface SseMessage {
  event: string;
  id?: string;
  data: string;
}

export function followSse(
  url: string,
  token: string,
  handlers: { onMessage: (m: SseMessage) => void; onError?: (status: number) => void; onOpen?: () => void },
): () => void {
  const controller = new AbortController();
  let lastId: string | undefined;
  let stopped = false;

  const connect = async (): Promise<void> => {
    while (!stopped) {
      try {
        const res = await fetch(url, {
          headers: {
            Authorization: `Bearer ${token}`,
            Accept: 'text/event-stream',
            ...(lastId ? { 'Last-Event-ID': lastId } : {}),
          },
          signal: controller.signal,
        });
        if (!res.ok || !res.body) {
          handlers.onError?.(res.status);
          if (res.status >= 400 && res.status < 500 && res.status !== 429) return;
        } else {
          handlers.onOpen?.();
          if (await read(res.body)) return;
        }
      } catch {
        if (stopped) return;
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  };

  /** Reads one connection; true once the stream said `end`. */
  const read = async (body: ReadableStream<Uint8Array>): Promise<boolean> => {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const m: SseMessage = { event: 'message', data: '' };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'event') m.event = val;
          else if (field === 'id') m.id = val;
          else if (field === 'data') data.push(val);
        }
        if (data.length === 0 && m.id === undefined) continue;
        m.data = data.join('\n');
        if (m.id !== undefined) lastId = m.id;
        handlers.onMessage(m);
        if (m.event === 'end') return true;
      }
    }
  };

  void connect();
  return () => {
    stopped = true;
    controller.abort();
  };
}
