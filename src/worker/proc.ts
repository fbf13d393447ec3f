import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';

/**
 * What the worker reads of processes from Linux's /proc: a process's group, session and start time (to recognise a
 * process group after a restart), CPU time and resident memory (to watch a job's process group). Elsewhere (no
 * /proc) every reader answers "nothing": memory is then not watched and orphans are recognised by group alone.
 */

/** Linux reports times in /proc in USER_HZ, 100 on every architecture. */
export const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcStat {
  pid: number;
  /** R, S, D, Z (a zombie: dead, not yet reaped), … */
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** user + system CPU time of the process itself, in clock ticks. */
  cpuTicks: number;
  /** Since boot, in clock ticks: with the boot id, identifies the process across pid reuse. */
  startTicks: number;
  /** Resident pages. */
  rssPages: number;
}

/** Parses /proc/<pid>/stat (the command name, in parentheses, may hold spaces and parentheses). */
export function parseStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  const open = text.indexOf('(');
  if (open < 0 || close < open) return null;
  const pid = Number(text.slice(0, open).trim());
  // Fields after the name, numbered from 3 (state) as in proc(5).
  const f = text
    .slice(close + 2)
    .trim()
    .split(' ');
  const at = (n: number) => Number(f[n - 3]);
  const numbers = {
    pid,
    ppid: at(4),
    pgrp: at(5),
    session: at(6),
    cpuTicks: at(14) + at(15),
    startTicks: at(22),
    rssPages: at(24),
  };
  return Object.values(numbers).every((v) => Number.isFinite(v)) ? { ...numbers, state: f[0] } : null;
}

/** One buffer for every read of a stat file (they are a few hundred bytes). */
const statBuffer = Buffer.alloc(4096);

export function readStat(pid: number): ProcStat | null {
  let fd: number | undefined;
  try {
    fd = openSync(`/proc/${pid}/stat`, 'r');
    const n = readSync(fd, statBuffer, 0, statBuffer.length, 0);
    return parseStat(statBuffer.toString('latin1', 0, n));
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Every process visible now (a snapshot: processes come and go while it is read). */
export function listProcesses(): ProcStat[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: ProcStat[] = [];
  for (const e of entries) {
    const c = e.charCodeAt(0);
    if (c < 48 || c > 57) continue; // not a pid
    const s = readStat(Number(e));
    if (s) out.push(s);
  }
  return out;
}

/** The kernel's page size: VmRSS (kB) over statm's resident pages, to the nearest usual size (4096 if unknown). */
let pageSize: number | undefined;
export function pageBytes(): number {
  if (pageSize !== undefined) return pageSize;
  pageSize = 4096;
  try {
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]);
    const pages = Number(readFileSync('/proc/self/statm', 'utf8').split(' ')[1]);
    if (kb > 0 && pages > 0) {
      const ratio = (kb * 1024) / pages;
      pageSize = [4096, 16384, 65536].reduce((a, b) => (Math.abs(b - ratio) < Math.abs(a - ratio) ? b : a));
    }
  } catch {
    /* not Linux */
  }
  return pageSize;
}

/** This boot's id: a process start time means something only within one boot. */
export function bootId(): string | null {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return null;
  }
}

/** Sends `signal` to every process of group `pgid`; false when the group is gone. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Whether a process of group `pgid` is still running. Zombies don't count: dead processes whose parent has not reaped
 * them yet (a job's orphans are reparented to PID 1, which in some containers never reaps them).
 */
export function groupAlive(pgid: number): boolean {
  if (!signalGroup(pgid, 0)) return false;
  if (process.platform !== 'linux') return true;
  return listProcesses().some((p) => p.pgrp === pgid && p.state !== 'Z');
}

/** Whether a process exists and is not a zombie (dead, waiting to be reaped by its parent). */
export function running(pid: number): boolean {
  const stat = readStat(pid);
  if (stat) return stat.state !== 'Z';
  try {
    process.kill(pid, 0);
    return process.platform !== 'linux'; // no /proc entry on Linux: gone
  } catch {
    return false;
  }
}
