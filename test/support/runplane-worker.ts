import { mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LogSink, LogSinkFactory, OutputStream } from '../../src/worker/log-sink';
import { Worker, type WorkerLog, type WorkerOptions } from '../../src/worker/worker';
import type { TestApp } from './test-app';

/** A sink that keeps what it is given, per stream; its quota flag flips past `quota` bytes if one is set. */
export class CapturingSink implements LogSink {
  readonly chunks: { stream: OutputStream; data: Buffer }[] = [];
  closed = false;
  constructor(private readonly quota = Infinity) {}
  get quotaExceeded(): boolean {
    return this.chunks.reduce((n, c) => n + c.data.length, 0) > this.quota;
  }
  write(stream: OutputStream, chunk: Buffer): void {
    this.chunks.push({ stream, data: Buffer.from(chunk) });
  }
  async close(): Promise<void> {
    this.closed = true;
  }
  text(stream: OutputStream): string {
    return Buffer.concat(this.chunks.filter((c) => c.stream === stream).map((c) => c.data)).toString('utf8');
  }
}

/** Sinks by submission id: what each job printed. */
export function capturingSinks(): {
  sinks: LogSinkFactory;
  /** What a submission's job printed on `stream` so far ('' before it started). */
  output: (submissionId: string, stream?: OutputStream) => string;
} {
  const made = new Map<string, CapturingSink>();
  return {
    sinks: ({ submissionId }) => {
      const sink = new CapturingSink();
      made.set(submissionId, sink);
      return sink;
    },
    output: (id, stream = 'stdout') => made.get(id)?.text(stream) ?? '',
  };
}

export const quietLog: WorkerLog = { info: () => undefined, warn: () => undefined, error: () => undefined };

/** The test app listening on a loopback port (workers speak HTTP to it); its URL. */
export async function listen(t: TestApp): Promise<string> {
  const server = t.app.getHttpServer() as import('node:http').Server;
  if (!server.listening) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export const tempWorkDir = () => mkdtempSync(join(tmpdir(), 'runplane-worker-test-'));

/** A started in-process worker, quick to notice things (tests wait on it). */
export async function startWorker(
  options: Pick<WorkerOptions, 'url' | 'token' | 'workerId' | 'workDir'> & Partial<WorkerOptions>,
): Promise<Worker> {
  const worker = new Worker(
    {
      capacity: { cpu: 4, memory_mib: 4096, gpu: 0 },
      heartbeatIntervalS: 0.2,
      pollIntervalS: 0.2,
      stopGraceS: 2,
      memoryEnforcement: 'rss',
      ...options,
    },
    quietLog,
  );
  await worker.start();
  return worker;
}

/** Polls `probe` until it returns something truthy; fails naming `what` after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got) return got;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
