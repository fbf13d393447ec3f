import { createHash } from 'node:crypto';
import { cpus, hostname, totalmem } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { Capacity } from './api';
import type { MemoryEnforcementOption } from './memory';
import type { WorkerOptions } from './worker';

export const WORKER_USAGE = `usage: runplane worker --url URL --token TOKEN [options]
  --url URL                  the runplane server (or RUNPLANE_URL)
  --token TOKEN              a service account's token (or RUNPLANE_TOKEN)
  --capacity LIST            what it runs at once, e.g. cpu=4,memory_mib=8192,gpu=0 (default: this machine)
  --work-dir DIR             jobs' working directories and the worker's state (default ./.runplane/worker)
  --worker-id ID             default <hostname>-<hash of the work dir>: keep it across restarts
  --container-runtime NAME   declare a container runtime (e.g. docker): jobs with an image are claimed only then
  --stop-grace-s N           between SIGTERM and SIGKILL when stopping a job (default 10)
  --heartbeat-interval-s N   one heartbeat for all jobs every N seconds (default 1)
  --poll-interval-s N        how often an idle worker asks for work (default 1)
  --memory-enforcement MODE  auto (cgroup v2 if writable, else watching /proc), rss (watching /proc), off`;

export class WorkerUsageError extends Error {}

const WORKER_ID = /^[A-Za-z0-9_.:@-]{1,128}$/;
const RUNTIME = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** This machine: every CPU, all of its memory, no GPU (none is detected). */
export function machineCapacity(): Capacity {
  return { cpu: cpus().length || 1, memory_mib: Math.floor(totalmem() / (1024 * 1024)), gpu: 0 };
}

/** A worker id that stays the same across restarts of a worker on this host with this work dir. */
export function defaultWorkerId(workDir: string): string {
  const host = (hostname() || 'host').replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 100);
  const dir = createHash('sha256').update(resolve(workDir)).digest('hex').slice(0, 8);
  return `${host}-${dir}`;
}

/** `cpu=4,memory_mib=8192,gpu=0` → a capacity; keys left out keep the machine's value (gpu: 0). */
export function parseCapacity(text: string, base: Capacity = machineCapacity()): Capacity {
  const out = { ...base };
  for (const part of text.split(',').filter(Boolean)) {
    const m = /^(cpu|memory_mib|gpu)=(\d+(?:\.\d+)?)$/.exec(part.trim());
    if (!m) throw new WorkerUsageError(`--capacity: "${part}" is not cpu=N, memory_mib=N or gpu=N`);
    const value = Number(m[2]);
    if (m[1] !== 'cpu' && !Number.isInteger(value))
      throw new WorkerUsageError(`--capacity: ${m[1]} must be an integer`);
    out[m[1] as keyof Capacity] = value;
  }
  return out;
}

function seconds(name: string, value: string | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > 86_400) throw new WorkerUsageError(`--${name} must be a number ≥ ${min}`);
  return n;
}

/** The worker's options from its command line and environment; throws WorkerUsageError naming what is wrong. */
export function parseWorkerArgs(argv: string[], env: NodeJS.ProcessEnv): WorkerOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        capacity: { type: 'string' },
        'work-dir': { type: 'string' },
        'worker-id': { type: 'string' },
        'container-runtime': { type: 'string' },
        'stop-grace-s': { type: 'string' },
        'heartbeat-interval-s': { type: 'string' },
        'poll-interval-s': { type: 'string' },
        'memory-enforcement': { type: 'string' },
      },
    }));
  } catch (err) {
    throw new WorkerUsageError((err as Error).message);
  }
  const url = values.url ?? env.RUNPLANE_URL;
  const token = values.token ?? env.RUNPLANE_TOKEN;
  if (!url || !/^https?:\/\/\S+$/.test(url))
    throw new WorkerUsageError('--url (or RUNPLANE_URL) must be an http(s) URL');
  if (!token) throw new WorkerUsageError('--token (or RUNPLANE_TOKEN) is required: a service account token');
  const workDir = values['work-dir'] ?? './.runplane/worker';
  const workerId = values['worker-id'] ?? defaultWorkerId(workDir);
  if (!WORKER_ID.test(workerId))
    throw new WorkerUsageError('--worker-id must be 1-128 characters of letters, digits, _ . : @ -');
  const runtime = values['container-runtime'];
  if (runtime !== undefined && !RUNTIME.test(runtime))
    throw new WorkerUsageError('--container-runtime must be 1-64 characters of lower-case letters, digits, . _ -');
  const memory = values['memory-enforcement'] ?? 'auto';
  if (!['auto', 'rss', 'off'].includes(memory))
    throw new WorkerUsageError('--memory-enforcement must be auto, rss or off');
  return {
    url,
    token,
    workerId,
    capacity: values.capacity ? parseCapacity(values.capacity) : machineCapacity(),
    workDir,
    containerRuntime: runtime,
    stopGraceS: seconds('stop-grace-s', values['stop-grace-s'], 10, 0),
    heartbeatIntervalS: seconds('heartbeat-interval-s', values['heartbeat-interval-s'], 1, 0.05),
    pollIntervalS: seconds('poll-interval-s', values['poll-interval-s'], 1, 0.05),
    memoryEnforcement: memory as MemoryEnforcementOption,
  };
}
