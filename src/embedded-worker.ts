import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { hostname, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { Env } from './config/env';
import { UsersService } from './modules/users/users.service';
import { workerLogger } from './worker/main';
import { machineCapacity } from './worker/options';
import { Worker } from './worker/worker';

/** Where the embedded worker works: RUNPLANE_WORKER_DIR, else `worker` beside the data directory. */
export function embeddedWorkDir(env: Pick<Env, 'RUNPLANE_DATA_DIR' | 'RUNPLANE_WORKER_DIR'>): string {
  if (env.RUNPLANE_WORKER_DIR) return resolve(env.RUNPLANE_WORKER_DIR);
  if (env.RUNPLANE_DATA_DIR.startsWith('memory://')) return join(tmpdir(), `runplane-worker-${process.pid}`);
  // Beside the database's directory, not in it: that one is PostgreSQL's.
  return join(dirname(resolve(env.RUNPLANE_DATA_DIR)), 'worker');
}

/** The server's own URL as this machine reaches it (a wildcard address is reached on loopback). */
export function ownUrl(address: AddressInfo): string {
  const wildcard = address.address === '0.0.0.0' || address.address === '::';
  if (address.family === 'IPv6') return `http://[${wildcard ? '::1' : address.address}]:${address.port}`;
  return `http://${wildcard ? '127.0.0.1' : address.address}:${address.port}`;
}

/**
 * The worker `serve` runs beside the server: the same worker as `runplane worker` (src/worker), in this process,
 * talking to this server over HTTP through the internal API only, with this machine's CPUs and memory as its
 * capacity. Its service account (named after it: `embedded-<hash of host and work dir>`, also its worker id) gets a
 * new token at each start; the secret lives only in this process's memory and the previous one is revoked.
 */
export async function startEmbeddedWorker(app: NestFastifyApplication, env: Env): Promise<Worker> {
  const workDir = embeddedWorkDir(env);
  const workerId = `embedded-${createHash('sha256').update(`${hostname()}\n${workDir}`).digest('hex').slice(0, 12)}`;
  // The lock first: a second server sharing this work dir must not revoke the first one's token.
  const lock = Worker.lock(workDir, workerId);
  try {
    const token = await app.get(UsersService).renewServiceToken(workerId);
    const worker = new Worker(
      {
        url: ownUrl(app.getHttpServer().address() as AddressInfo),
        token,
        workerId,
        capacity: machineCapacity(),
        workDir,
        heartbeatIntervalS: 1,
        pollIntervalS: 1,
        stopGraceS: 10,
        memoryEnforcement: 'auto',
        lock,
      },
      workerLogger(env.LOG_LEVEL, 'runplane-embedded-worker'),
    );
    await worker.start();
    return worker;
  } catch (err) {
    lock.release();
    throw err;
  }
}
