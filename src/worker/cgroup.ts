import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Memory limits through cgroup v2, where this process may manage a subtree: each job gets a child cgroup with
 * `memory.max` = its request (no swap beyond it, the whole group killed on OOM), and its shell joins it before
 * running anything, so every process it starts (daemons that leave the process group included) is counted,
 * limited and killed with it. Used only when every step works; anything missing (cgroup v1, no memory controller,
 * a read-only or undelegated hierarchy) and the worker watches process trees instead (see memory.ts).
 *
 * cgroup v2 forbids processes in a cgroup whose children have controllers ("no internal processes"): the worker
 * moves itself into a leaf `runplane-worker` below its own cgroup first, and gives up if anything else still lives
 * in its cgroup (it would not move other programs' processes).
 */
export class CgroupV2 {
  private constructor(
    /** The worker's own cgroup (the jobs' parent), as a directory. */
    readonly base: string,
  ) {}

  /**
   * Sets up the subtree, or null when cgroup v2 memory limits can't be used here. `root` is the cgroup2 mount and
   * `selfCgroup` the text of /proc/self/cgroup (parameters for tests).
   */
  static setUp(
    root = '/sys/fs/cgroup',
    selfCgroup: string | null = readOrNull('/proc/self/cgroup'),
    pid = process.pid,
  ): CgroupV2 | null {
    try {
      const own = /^0::(\/.*)$/m.exec(selfCgroup ?? '')?.[1];
      if (own === undefined || !existsSync(join(root, 'cgroup.controllers'))) return null;
      const base = join(root, own);
      if (!words(join(base, 'cgroup.controllers')).includes('memory')) return null;
      if (!words(join(base, 'cgroup.subtree_control')).includes('memory')) {
        const procs = words(join(base, 'cgroup.procs'));
        if (procs.some((p) => p !== String(pid))) return null;
        if (procs.length > 0) {
          const leaf = join(base, 'runplane-worker');
          mkdirSync(leaf, { recursive: true });
          writeFileSync(join(leaf, 'cgroup.procs'), String(pid));
        }
        writeFileSync(join(base, 'cgroup.subtree_control'), '+memory');
      }
      const cg = new CgroupV2(base);
      // A probe: create a job cgroup, limit it, remove it.
      const probe = cg.create('runplane-probe', 1024 * 1024 * 1024);
      probe.remove();
      return cg;
    } catch {
      return null;
    }
  }

  /** A cgroup for one job, limited to `memoryBytes`. */
  create(name: string, memoryBytes: number): JobCgroup {
    const dir = join(this.base, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'memory.max'), String(Math.max(memoryBytes, 1024 * 1024)));
    // Best effort: without swap accounting or group OOM the limit still holds for resident memory.
    tryWrite(join(dir, 'memory.swap.max'), '0');
    tryWrite(join(dir, 'memory.oom.group'), '1');
    return new JobCgroup(dir);
  }
}

/** One job's cgroup: its processes join through `procsFile`. */
export class JobCgroup {
  private peakSeen = 0;

  constructor(readonly dir: string) {}

  get procsFile(): string {
    return join(this.dir, 'cgroup.procs');
  }

  /** Current memory use in bytes (and the highest seen, for kernels without memory.peak). */
  sample(): number {
    const now = Number(readOrNull(join(this.dir, 'memory.current')) ?? 0) || 0;
    this.peakSeen = Math.max(this.peakSeen, now);
    return now;
  }

  peakBytes(): number {
    const peak = Number(readOrNull(join(this.dir, 'memory.peak')) ?? NaN);
    return Number.isFinite(peak) ? Math.max(peak, this.peakSeen) : Math.max(this.sample(), this.peakSeen);
  }

  /** CPU time of everything that ran in it, from cpu.stat (always there in cgroup v2). */
  cpuSeconds(): number | null {
    const usec = /^usage_usec (\d+)$/m.exec(readOrNull(join(this.dir, 'cpu.stat')) ?? '')?.[1];
    return usec === undefined ? null : Number(usec) / 1e6;
  }

  /** Whether the kernel killed a process of it for going over memory.max. */
  oomKilled(): boolean {
    const n = /^oom_kill (\d+)$/m.exec(readOrNull(join(this.dir, 'memory.events')) ?? '')?.[1];
    return n !== undefined && Number(n) > 0;
  }

  /** SIGKILL to every process in it (cgroup.kill, Linux 5.14+); false where that file is missing. */
  killAll(): boolean {
    return tryWrite(join(this.dir, 'cgroup.kill'), '1');
  }

  isEmpty(): boolean {
    return words(this.procsFile).length === 0;
  }

  /** Removes it (only an empty cgroup can be removed). */
  remove(): boolean {
    try {
      rmdirSync(this.dir);
      return true;
    } catch {
      return false;
    }
  }
}

function readOrNull(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

const words = (path: string): string[] => (readOrNull(path) ?? '').split(/\s+/).filter(Boolean);

function tryWrite(path: string, text: string): boolean {
  try {
    writeFileSync(path, text);
    return true;
  } catch {
    return false;
  }
}
