import { CgroupV2, JobCgroup } from './cgroup';
import { CLOCK_TICKS_PER_SECOND, listProcesses, pageBytes } from './proc';

/**
 * A job's memory limit (its requested memory_mib), enforced as far as the host allows:
 * - `cgroup`: cgroup v2 where this process may manage a subtree (cgroup.ts): the kernel enforces `memory.max` on
 *   everything the job starts; over it, the kernel's OOM killer ends the job (all of it).
 * - `rss`: elsewhere on Linux, the process group's resident memory (the sum of its processes' RSS, shared pages
 *   counted in each) is sampled every `sampleMs`; past the limit the group gets SIGKILL. A peak between two samples,
 *   or a process that left the group (setsid), is not seen.
 * - `off`: no /proc (not Linux), or asked for: nothing is enforced or measured.
 */
export type MemoryMode = 'cgroup' | 'rss' | 'off';
export type MemoryEnforcementOption = 'auto' | 'rss' | 'off';

const MIB = 1024 * 1024;
/** A first look this soon after a start (shared by the jobs starting meanwhile): a short job may end before another. */
const FIRST_SAMPLE_MS = 50;
/**
 * ...but never sooner than this after the previous pass over /proc: a pass reads every process's stat file, and with
 * jobs starting every few ms one pass per start cost more CPU than the jobs (and the embedded server's event loop).
 */
const MIN_SAMPLE_GAP_MS = 250;

export interface JobMemory {
  readonly mode: MemoryMode;
  /** The cgroup.procs file the job's shell writes its pid into before running anything (cgroup mode), else null. */
  readonly procsFile: string | null;
  /** Starts watching the job's process group; `onExceeded` is called once when it goes over the limit (rss mode). */
  watch(pgid: number, onExceeded: () => void): void;
  /** The highest memory use seen, MiB (null when nothing is measured). */
  peakMib(): number | null;
  /** CPU seconds measured here (cgroup: exact; rss: last sample of the group), or null. */
  cpuSeconds(): number | null;
  /** The kernel's OOM killer ended a process of the job (cgroup mode). */
  oomKilled(): boolean;
  /** Kills whatever is left of the job that the process group may miss (cgroup mode: the whole cgroup). */
  killAll(): void;
  /** Stops watching and removes what was set up for the job. */
  release(): void;
}

interface Watched {
  limitBytes: number;
  /** null until a sample saw the group. */
  peakBytes: number | null;
  cpuTicks: number;
  exceeded: boolean;
  onExceeded: () => void;
}

export class MemoryEnforcer {
  private readonly groups = new Map<number, Watched>();
  private readonly cgroups = new Set<JobCgroup>();
  private timer: NodeJS.Timeout | null = null;
  private soon: NodeJS.Timeout | null = null;
  private lastSample = -Infinity;

  private constructor(
    readonly mode: MemoryMode,
    private readonly cgroup: CgroupV2 | null,
    private readonly sampleMs: number,
  ) {}

  static create(option: MemoryEnforcementOption, sampleMs = 500): MemoryEnforcer {
    if (option === 'off' || process.platform !== 'linux') return new MemoryEnforcer('off', null, sampleMs);
    const cgroup = option === 'auto' ? CgroupV2.setUp() : null;
    return new MemoryEnforcer(cgroup ? 'cgroup' : 'rss', cgroup, sampleMs);
  }

  forJob(name: string, limitMib: number): JobMemory {
    if (this.mode === 'cgroup' && this.cgroup) {
      try {
        return this.cgroupJob(this.cgroup.create(`runplane-${name}`, limitMib * MIB));
      } catch {
        // This one job falls back to watching its process group.
      }
    }
    return this.mode === 'off' ? offJob : this.rssJob(limitMib * MIB);
  }

  private cgroupJob(cg: JobCgroup): JobMemory {
    this.cgroups.add(cg);
    this.ensureTimer();
    return {
      mode: 'cgroup',
      procsFile: cg.procsFile,
      watch: () => undefined,
      peakMib: () => cg.peakBytes() / MIB,
      cpuSeconds: () => cg.cpuSeconds(),
      oomKilled: () => cg.oomKilled(),
      killAll: () => void cg.killAll(),
      release: () => {
        this.cgroups.delete(cg);
        cg.killAll();
        cg.remove();
      },
    };
  }

  private rssJob(limitBytes: number): JobMemory {
    let pgid: number | null = null;
    let last: Watched | null = null;
    return {
      mode: 'rss',
      procsFile: null,
      watch: (group, onExceeded) => {
        pgid = group;
        last = { limitBytes, peakBytes: null, cpuTicks: 0, exceeded: false, onExceeded };
        this.groups.set(group, last);
        this.ensureTimer();
        // A first look soon after the start (shared by jobs starting together): a short job may end before the next.
        this.soon ??= setTimeout(
          () => {
            this.soon = null;
            this.sample();
          },
          Math.max(FIRST_SAMPLE_MS, this.lastSample + MIN_SAMPLE_GAP_MS - performance.now()),
        ).unref();
      },
      peakMib: () => (last?.peakBytes != null ? last.peakBytes / MIB : null),
      cpuSeconds: () => (last ? last.cpuTicks / CLOCK_TICKS_PER_SECOND : null),
      oomKilled: () => false,
      killAll: () => undefined,
      release: () => {
        if (pgid !== null) this.groups.delete(pgid);
      },
    };
  }

  private ensureTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sample(), this.sampleMs);
    this.timer.unref();
  }

  /** One pass over /proc for every watched group, and one read of each job cgroup's memory. */
  private sample(): void {
    if (this.groups.size === 0 && this.cgroups.size === 0) {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      return;
    }
    for (const cg of this.cgroups) cg.sample();
    if (this.groups.size === 0) return;
    this.lastSample = performance.now();
    const totals = new Map<number, { rss: number; cpu: number }>();
    for (const p of listProcesses()) {
      if (!this.groups.has(p.pgrp)) continue;
      const t = totals.get(p.pgrp) ?? { rss: 0, cpu: 0 };
      t.rss += p.rssPages;
      t.cpu += p.cpuTicks;
      totals.set(p.pgrp, t);
    }
    const page = pageBytes();
    for (const [pgid, w] of this.groups) {
      const t = totals.get(pgid);
      if (!t) continue;
      const bytes = t.rss * page;
      w.peakBytes = Math.max(w.peakBytes ?? 0, bytes);
      w.cpuTicks = Math.max(w.cpuTicks, t.cpu);
      if (bytes > w.limitBytes && !w.exceeded) {
        w.exceeded = true;
        w.onExceeded();
      }
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.soon) clearTimeout(this.soon);
    this.timer = null;
    this.soon = null;
    this.groups.clear();
  }
}

/** Nothing watched or enforced here (memory off, or a container: its runtime enforces the limit). */
export const offJob: JobMemory = {
  mode: 'off',
  procsFile: null,
  watch: () => undefined,
  peakMib: () => null,
  cpuSeconds: () => null,
  oomKilled: () => false,
  killAll: () => undefined,
  release: () => undefined,
};
