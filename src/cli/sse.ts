/** One Server-Sent Event. */
export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/**
 * The events of a text/event-stream body, as they arrive; ends when the server ends the stream (or `signal`
 * aborts the request). Comments (heartbeats) and `retry:` lines are skipped.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  const reader = body.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const ev: SseEvent = { event: 'message', data: '' };
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith(':') || line === '') continue;
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'data') data.push(value);
          else if (field === 'event') ev.event = value;
          else if (field === 'id') ev.id = value;
        }
        if (data.length === 0) continue;
        ev.data = data.join('\n');
        yield ev;
      }
    }
  } finally {
    reader.releaseLock();
  }
}
