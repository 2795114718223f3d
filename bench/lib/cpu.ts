import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/** CPU time of the processes a section cares about, from /proc (Linux; elsewhere only this process's own). */

let ticks: number | null = null;
const clockTicks = () => (ticks ??= Number(tryOr(() => execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim(), '100')) || 100);

function tryOr<T>(f: () => T, fallback: T): T {
  try {
    return f();
  } catch {
    return fallback;
  }
}

/** utime + stime + cutime + cstime of one process, in seconds (fields 14..17, after the parenthesised name). */
const processSeconds = (pid: number) =>
  tryOr(() => {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ').slice(11, 15).map(Number).reduce((a, b) => a + b, 0) / clockTicks();
  }, 0);
const commOf = (pid: number) => tryOr(() => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim(), null);
const childrenOf = (pid: number) =>
  tryOr(() => fs.readdirSync(`/proc/${pid}/task`).flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number)), [] as number[]);

/** A process and all its descendants. */
function tree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...childrenOf(out[i]));
  return out;
}

const pidsNamed = (name: string) => tryOr(() => fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => commOf(pid) === name), [] as number[]);

/** Busy and total jiffies of the whole machine (/proc/stat). */
const machineJiffies = () =>
  tryOr(() => {
    const v = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - v[3] - (v[4] ?? 0), total };
  }, null);

export interface CpuSnapshot {
  at: number;
  seconds: Record<string, number>;
  machine: { busy: number; total: number } | null;
}

export interface CpuUse {
  wallSeconds: number;
  /** Per component: cores used on average over the interval (1.0 = one core busy). */
  cores: Record<string, number>;
  /** Whole-machine utilisation, 0..1 of all cores. */
  machineBusy: number | null;
  cpus: number;
}

/** Components: `node` (this process), each named pid's process tree, each process name (e.g. every `postgres` backend). */
export function cpuSnapshot(opts: { pids?: Record<string, number | undefined>; names?: Record<string, string> }): CpuSnapshot {
  const self = process.cpuUsage();
  const seconds: Record<string, number> = { node: (self.user + self.system) / 1e6 };
  for (const [label, pid] of Object.entries(opts.pids ?? {})) if (pid) seconds[label] = tree(pid).reduce((s, p) => s + processSeconds(p), 0);
  for (const [label, name] of Object.entries(opts.names ?? {})) seconds[label] = pidsNamed(name).reduce((s, p) => s + processSeconds(p), 0);
  return { at: performance.now(), seconds, machine: machineJiffies() };
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot, cpus: number): CpuUse {
  const wallSeconds = (b.at - a.at) / 1000;
  const cores: Record<string, number> = {};
  for (const k of Object.keys(b.seconds)) cores[k] = wallSeconds > 0 ? Math.max(0, b.seconds[k] - (a.seconds[k] ?? 0)) / wallSeconds : 0;
  const machineBusy = a.machine && b.machine && b.machine.total > a.machine.total ? (b.machine.busy - a.machine.busy) / (b.machine.total - a.machine.total) : null;
  // Whatever else kept the machine busy: noise for the figures.
  if (machineBusy !== null) cores.other = Math.max(0, machineBusy * cpus - Object.values(cores).reduce((x, y) => x + y, 0));
  return { wallSeconds, cores, machineBusy, cpus };
}

export function formatCpu(u: CpuUse): string {
  const machine = u.machineBusy === null ? '' : `; machine ${(u.machineBusy * 100).toFixed(0)}% of ${u.cpus} cores`;
  return `cores used: ${Object.entries(u.cores).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}${machine}`;
}
