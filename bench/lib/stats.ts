/** Small statistics helpers for sections that time events themselves. */
import type { RunStats, TargetSummary } from './types';

export const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when there are none. */
export function percentile(xs: number[], p: number): number {
  if (!xs.length) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export interface Spread {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

export function spread(xs: number[]): Spread {
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs.length ? Math.max(...xs) : NaN, mean: mean(xs) };
}

export const round1 = (n: number): number => Math.round(n * 10) / 10;

/** One target's aggregate over its measured rounds (runs of other targets are ignored). */
export function summarizeTarget(runs: Array<Pick<RunStats, 'target' | 'requestsPerSec' | 'latencyP50Ms' | 'latencyP99Ms'>>, target: string): TargetSummary {
  const rs = runs.filter((r) => r.target === target);
  return {
    target,
    rounds: rs.length,
    meanRequestsPerSec: mean(rs.map((r) => r.requestsPerSec)),
    bestRequestsPerSec: Math.max(...rs.map((r) => r.requestsPerSec)),
    meanLatencyP50Ms: mean(rs.map((r) => r.latencyP50Ms)),
    meanLatencyP99Ms: mean(rs.map((r) => r.latencyP99Ms)),
  };
}
