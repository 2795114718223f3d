import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/**
 * CPU time used by the processes a section cares about, read from /proc (Linux only;
 * elsewhere every figure but this process's own is missing). Used to see which
 * component a throughput figure is bound by on a small machine.
 */

let ticksPerSecond: number | null = null;
function clockTicks(): number {
  if (ticksPerSecond === null) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** utime + stime + cutime + cstime of one process, in seconds; 0 when it is gone. */
function processSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may contain spaces: split after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state); utime..cstime are fields 14..17.
    const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
    return (utime + stime + cutime + cstime) / clockTicks();
  } catch {
    return 0;
  }
}

function commOf(pid: number): string | null {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}

function childrenOf(pid: number): number[] {
  try {
    const out: number[] = [];
    for (const task of fs.readdirSync(`/proc/${pid}/task`)) {
      const raw = fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      if (raw) out.push(...raw.split(' ').map(Number));
    }
    return out;
  } catch {
    return [];
  }
}

/** A process and all its descendants. */
function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...childrenOf(out[i]));
  return out;
}

/** The first descendant of `pid` whose command is `name` (e.g. a server the Temporal core bridge spawned), or undefined. */
export function descendantNamed(pid: number, name: string): number | undefined {
  return tree(pid).find((p) => p !== pid && commOf(p) === name);
}

function pidsNamed(name: string): number[] {
  try {
    return fs
      .readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .map(Number)
      .filter((pid) => commOf(pid) === name);
  } catch {
    return [];
  }
}

/** Busy and total jiffies of the whole machine (/proc/stat), or null. */
function machineJiffies(): { busy: number; total: number } | null {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = v[3] + (v[4] ?? 0);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

export interface CpuSnapshot {
  at: number;
  /** CPU seconds per component. */
  seconds: Record<string, number>;
  machine: { busy: number; total: number } | null;
}

export interface CpuUse {
  wallSeconds: number;
  /** Per component: cores used on average over the interval (1.0 = one core busy). */
  cores: Record<string, number>;
  /** Whole-machine utilisation, 0..1 of all cores, when /proc/stat is readable. */
  machineBusy: number | null;
  cpus: number;
}

/**
 * Components: `node` (this process, every thread: the Temporal core threads and libuv's
 * pool included), each named pid's process tree, and each process name (e.g. all
 * `postgres` backends, the postmaster's reaped children included).
 */
export function cpuSnapshot(opts: { pids?: Record<string, number | undefined>; names?: Record<string, string> }): CpuSnapshot {
  const self = process.cpuUsage();
  const seconds: Record<string, number> = { node: (self.user + self.system) / 1e6 };
  for (const [label, pid] of Object.entries(opts.pids ?? {})) {
    if (pid) seconds[label] = tree(pid).reduce((s, p) => s + processSeconds(p), 0);
  }
  for (const [label, name] of Object.entries(opts.names ?? {})) seconds[label] = pidsNamed(name).reduce((s, p) => s + processSeconds(p), 0);
  return { at: performance.now(), seconds, machine: machineJiffies() };
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot, cpus: number): CpuUse {
  const wallSeconds = (b.at - a.at) / 1000;
  const cores: Record<string, number> = {};
  for (const k of Object.keys(b.seconds)) cores[k] = wallSeconds > 0 ? Math.max(0, b.seconds[k] - (a.seconds[k] ?? 0)) / wallSeconds : 0;
  const machineBusy = a.machine && b.machine && b.machine.total > a.machine.total ? (b.machine.busy - a.machine.busy) / (b.machine.total - a.machine.total) : null;
  // Whatever else kept the machine busy (other processes, the kernel): noise for the figures.
  if (machineBusy !== null) cores.other = Math.max(0, machineBusy * cpus - Object.values(cores).reduce((x, y) => x + y, 0));
  return { wallSeconds, cores, machineBusy, cpus };
}

export function formatCpu(u: CpuUse): string {
  const parts = Object.entries(u.cores).map(([k, v]) => `${k} ${v.toFixed(2)}`);
  const machine = u.machineBusy === null ? '' : `; machine ${(u.machineBusy * 100).toFixed(0)}% of ${u.cpus} cores`;
  return `cores used: ${parts.join(', ')}${machine}`;
}
