import autocannon from 'autocannon';
import { summarizeTarget } from './stats';
import type { RunStats, TargetSummary } from './types';

export function envNumber(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) throw new Error(`${name}=${raw}: expected a number >= ${min}`);
  return value;
}

/** envNumber, rounded. */
export const envInt = (name: string, fallback: number, min: number) => Math.round(envNumber(name, fallback, min));

export type LoadSettings = ReturnType<typeof loadSettings>;

/** Settings shared by every section (see bench/run.ts). */
export function loadSettings() {
  return {
    durationSeconds: envNumber('BENCH_DURATION_SECONDS', 10, 1),
    warmupSeconds: envNumber('BENCH_WARMUP_SECONDS', 2, 0),
    connections: envInt('BENCH_CONNECTIONS', 10, 1),
    rounds: envInt('BENCH_ROUNDS', 2, 1),
  };
}

export type LoadTarget = { name: string; url: string; headers?: Record<string, string> };

/** One autocannon run, in a worker thread (not the server's event loop); throws unless every response was a 2xx. */
export async function runLoad(target: LoadTarget, opts: { seconds: number; connections: number; round: number }): Promise<RunStats> {
  const result = await autocannon({ url: target.url, headers: target.headers, connections: opts.connections, duration: opts.seconds, workers: 1 });
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stat?.count ?? 0;
  const twoXx = result['2xx'];
  const completed = result.requests.total;
  const what = opts.round === 0 ? 'warm-up' : `round ${opts.round}`;
  if (result.errors || result.timeouts || result.non2xx || twoXx === 0 || twoXx !== completed) {
    throw new Error(
      `${target.name} (${what}): expected only 2xx responses, got ${JSON.stringify(statusCodes)} ` +
        `(2xx ${twoXx} of ${completed} completed, non-2xx ${result.non2xx}, errors ${result.errors}, timeouts ${result.timeouts})`,
    );
  }
  // durationSeconds: autocannon stops on its first one-second sample after the duration, so a run can last a second longer;
  // requestsPerSec: autocannon's mean of its one-second samples (≈ total / duration).
  const { latency } = result;
  return {
    target: target.name, round: opts.round, durationSeconds: result.duration, connections: opts.connections, requestsPerSec: result.requests.mean,
    latencyP50Ms: latency.p50, latencyP99Ms: latency.p99, latencyMeanMs: latency.average, totalRequests: completed, statusCodes,
  };
}

export function formatRun(s: RunStats): string {
  const what = s.round === 0 ? 'warm-up' : `round ${s.round}`;
  return (
    `  ${s.target.padEnd(16)} ${what.padEnd(8)} ${s.requestsPerSec.toFixed(0).padStart(7)} req/s  ` +
    `p50 ${s.latencyP50Ms.toFixed(1).padStart(6)} ms  p99 ${s.latencyP99Ms.toFixed(1).padStart(6)} ms  ` +
    `(${s.totalRequests} requests in ${s.durationSeconds.toFixed(1)} s, all 2xx)`
  );
}

/** Every target `rounds` times after a warm-up each, the order alternating (A B C, C B A, ...) so drift weighs on all alike. */
export async function measureInterleaved(targets: LoadTarget[], settings: LoadSettings, log: (line: string) => void): Promise<{ runs: RunStats[]; summaries: TargetSummary[] }> {
  const runs: RunStats[] = [];
  if (settings.warmupSeconds > 0) {
    for (const t of targets) {
      const s = await runLoad(t, { seconds: settings.warmupSeconds, connections: settings.connections, round: 0 });
      runs.push(s);
      log(formatRun(s));
    }
  }
  for (let round = 1; round <= settings.rounds; round++) {
    const order = round % 2 === 1 ? targets : [...targets].reverse();
    for (const t of order) {
      const s = await runLoad(t, { seconds: settings.durationSeconds, connections: settings.connections, round });
      runs.push(s);
      log(formatRun(s));
    }
  }
  return { runs, summaries: targets.map((t): TargetSummary => summarizeTarget(runs, t.name)) };
}
