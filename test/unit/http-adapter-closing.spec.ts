import { connect } from 'node:net';
import { createHttpAdapter } from '../../src/common/http/http-adapter';
import { required } from '../../src/common/required';

/** Sends raw HTTP/1.1 on one connection; resolves with what came back once the server closes it or `until` holds. */
function exchange(port: number, requests: string[], until: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const sent = [...requests];
    socket.on('connect', () => socket.write(required(sent.shift(), 'the next request')));
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (until(text)) return void socket.end();
      // The next request as soon as the previous answer is whole (keep-alive reuse, as a client pool does).
      if (sent.length > 0 && text.split('HTTP/1.1 ').length - 1 === requests.length - sent.length) {
        socket.write(required(sent.shift(), 'the next request'));
      }
    });
    socket.on('close', () => resolve(text));
    socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(text) : reject(err)));
  });
}

describe('HTTP adapter: a request arriving while the server closes', () => {
  it('is served (or its connection closed), never answered 503', async () => {
    const fastify = createHttpAdapter().getInstance();
    let slowStarted!: () => void;
    const started = new Promise<void>((r) => (slowStarted = r));
    fastify.get('/slow', async () => {
      slowStarted();
      await new Promise((r) => setTimeout(r, 300));
      return { answer: 'slow' };
    });
    fastify.get('/fast', async () => ({ answer: 'fast' }));
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const address = fastify.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n`;
    // The first request is in flight when the close begins; the second goes on the same connection after its answer.
    const answers = exchange(port, [get('/slow'), get('/fast')], (t) => t.includes('"fast"'));
    await started;
    const closed = fastify.close();
    const text = await answers;
    await closed;
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
    expect(statuses[0]).toBe(200);
    expect(text).toContain('"slow"');
    // Served, or the connection closed before it was read (a client tries another instance): never a 503.
    expect(statuses.slice(1).every((s) => s === 200)).toBe(true);
    expect(statuses.length === 1 || text.includes('"fast"')).toBe(true);
  });
});
