/** Small statistics helpers for sections that time events themselves; a process's memory. */
import fs from 'node:fs';
import type { Check, Comparison, RunStats, TargetSummary } from './types';

export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when there are none. */
export function percentile(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export type Spread = Record<'n' | 'p50' | 'p99' | 'max' | 'mean', number>;

export function spread(xs: number[]): Spread {
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs.length ? Math.max(...xs) : NaN, mean: mean(xs) };
}

export const round1 = (n: number): number => Math.round(n * 10) / 10;
export const now = () => performance.now();
/** Milliseconds as the sections print them: whole from 100 up, else one decimal. */
export const ms = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
/** `p50 X ms, p99 Y ms`. */
export const p50p99 = (s: Pick<Spread, 'p50' | 'p99'>, f: (x: number) => string = ms) => `p50 ${f(s.p50)} ms, p99 ${f(s.p99)} ms`;

/** Subject and baseline samples, and the overhead: each subject sample minus the baseline's p50. */
export function overhead(subject: number[], baseline: number[]): { subject: Spread; baseline: Spread; overhead: Spread } {
  const baseP50 = percentile(baseline, 50);
  return { subject: spread(subject), baseline: spread(baseline), overhead: spread(subject.map((x) => x - baseP50)) };
}

/** `n` calls of `f(i)` one after another: each one's milliseconds. */
export async function timeEach(n: number, f: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await f(i);
    out.push(now() - t0);
  }
  return out;
}

/** `count` samples per side, one for one, the side going first swapping each time. */
export async function alternate<S>(count: number, subject: (i: number) => Promise<S>, baseline: (i: number) => Promise<S>): Promise<{ subject: S[]; baseline: S[] }> {
  const out = { subject: [] as S[], baseline: [] as S[] };
  for (let i = 0; i < count; i++) {
    for (const side of i % 2 === 0 ? (['subject', 'baseline'] as const) : (['baseline', 'subject'] as const)) out[side].push(await (side === 'subject' ? subject(i) : baseline(i)));
  }
  return out;
}

/** A RunStats for sequential samples: req/s = 1000 / mean of `perSample` (default: the latencies). */
export function sequentialRun(target: string, latenciesMs: number[], status: Record<string, number>, seconds?: number, perSample = latenciesMs): RunStats {
  const r = runStats(target, 1, seconds ?? perSample.reduce((a, x) => a + x, 0) / 1000, latenciesMs.length, latenciesMs, 1, status);
  return { ...r, requestsPerSec: 1000 / mean(perSample) };
}

/** A Comparison from two rates (a section's own figures rather than rounds of RunStats); `ratio`: subject ÷ baseline unless given. */
export function comparison(
  names: Pick<Comparison, 'name' | 'subject' | 'baseline' | 'subjectUnit' | 'baselineUnit'>,
  r: { subject: number; baseline: number; target: number; best: number; rounds?: number[] },
  ratio = r.subject / r.baseline,
): Comparison {
  return { ...names, subjectRequestsPerSec: r.subject, baselineRequestsPerSec: r.baseline, ratio, roundRatios: r.rounds ?? [], bestRatio: r.best, target: r.target, pass: ratio >= r.target };
}

/** A figure against an upper limit. */
export const below = (name: string, value: number, unit: string, limit: number): Check => ({ name, value, unit, goal: `< ${limit}`, pass: value < limit });

/** One target's aggregate over its measured rounds (round > 0). */
export function summarizeTarget(runs: RunStats[], target: string): TargetSummary {
  const rs = runs.filter((r) => r.target === target && r.round > 0);
  return {
    target,
    rounds: rs.length,
    meanRequestsPerSec: mean(rs.map((r) => r.requestsPerSec)),
    bestRequestsPerSec: Math.max(...rs.map((r) => r.requestsPerSec)),
    meanLatencyP50Ms: mean(rs.map((r) => r.latencyP50Ms)),
    meanLatencyP99Ms: mean(rs.map((r) => r.latencyP99Ms)),
  };
}

/** Subject vs baseline over the measured rounds: ratio of the means, per-round ratios, best/best. */
export function compareTargets(runs: RunStats[], name: string, subject: string, baseline: string, target: number, unit?: string): Comparison {
  const s = summarizeTarget(runs, subject);
  const b = summarizeTarget(runs, baseline);
  const inRound = (t: string, round: number) => runs.find((r) => r.target === t && r.round === round)!.requestsPerSec;
  const rounds = [...new Set(runs.filter((r) => r.round > 0).map((r) => r.round))];
  return comparison(
    { name, subject, baseline, ...(unit ? { subjectUnit: unit, baselineUnit: unit } : {}) },
    { subject: s.meanRequestsPerSec, baseline: b.meanRequestsPerSec, target, best: s.bestRequestsPerSec / b.bestRequestsPerSec, rounds: rounds.map((k) => inRound(subject, k) / inRound(baseline, k)) },
  );
}

/** A RunStats for `n` events timed by the section itself. */
export function runStats(target: string, round: number, seconds: number, n: number, latenciesMs: number[], connections: number, statusCodes: Record<string, number>): RunStats {
  const lat = spread(latenciesMs);
  return { target, round, durationSeconds: seconds, connections, requestsPerSec: n / seconds, latencyP50Ms: lat.p50, latencyP99Ms: lat.p99, latencyMeanMs: lat.mean, totalRequests: n, statusCodes };
}

type AsyncFn = (...args: any[]) => Promise<unknown>;
type Args<F> = Parameters<Extract<F, AsyncFn>>;

/** Times a method from outside: wraps it on this instance with calls before it and after it resolves. */
export function around<T, K extends keyof T>(obj: T, method: K, before: (...args: Args<T[K]>) => void, after: (result: Awaited<ReturnType<Extract<T[K], AsyncFn>>>, ...args: Args<T[K]>) => void): void {
  const original = (obj[method] as AsyncFn).bind(obj);
  obj[method] = (async (...args: Args<T[K]>) => {
    before(...args);
    const result = (await original(...args)) as Awaited<ReturnType<Extract<T[K], AsyncFn>>>;
    after(result, ...args);
    return result;
  }) as T[K];
}

/** `n` calls of `one(i)`, `concurrency` in flight. */
export async function inLanes(n: number, concurrency: number, one: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < n) await one(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, lane));
}

/** VmRSS and VmHWM of a process (Linux), in bytes, or null. */
export function procMemory(pid: number | 'self' = 'self'): { rss: number; hwm: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return null;
  }
}

/** Resets a process's resident-memory high-water mark (Linux: 5 to clear_refs); false where not permitted (VmHWM then counts from its start). */
export const resetHwm = (pid: number | 'self' = 'self') => fs.promises.writeFile(`/proc/${pid}/clear_refs`, '5').then(() => true, () => false);

/** Polls `cond` until it holds; throws after `timeoutMs` with `what()`. */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs: number, what: () => string, everyMs = 10): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${(timeoutMs / 1000).toFixed(0)} s: ${what()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
