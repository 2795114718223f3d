/** What one autocannon run against one server measured. */
export interface RunStats {
  /** Which server (e.g. 'baseline', 'authed-memory'). */
  target: string;
  /** 1-based round number; 0 for a warm-up. */
  round: number;
  durationSeconds: number;
  connections: number;
  /** autocannon's mean of the per-second request counts. */
  requestsPerSec: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  totalRequests: number;
  statusCodes: Record<string, number>;
}

/** The per-target aggregate over every measured round. */
export interface TargetSummary {
  target: string;
  rounds: number;
  /** Mean of the rounds' requests/s: the figure the ratios use. */
  meanRequestsPerSec: number;
  bestRequestsPerSec: number;
  meanLatencyP50Ms: number;
  meanLatencyP99Ms: number;
}

/** One "subject vs baseline" line of the summary. */
export interface Comparison {
  name: string;
  subject: string;
  baseline: string;
  subjectRequestsPerSec: number;
  baselineRequestsPerSec: number;
  /** subjectRequestsPerSec / baselineRequestsPerSec (means over the rounds). */
  ratio: number;
  /** The same ratio within each round (adjacent runs): its spread shows how noisy the machine was. */
  roundRatios: number[];
  /** The ratio of the best rounds (noise only ever slows a run, so best/best is the other fair estimate). */
  bestRatio: number;
  /** The ratio must be at least this. */
  target: number;
  pass: boolean;
  /** What the subject's and the baseline's rates count (default 'req/s'), e.g. 'deliveries/s'. */
  subjectUnit?: string;
  baselineUnit?: string;
}

/** One figure against a goal, e.g. RSS growth 38 MB against < 64 MB. */
export interface Check {
  name: string;
  value: number;
  unit: string;
  /** The goal as written, e.g. '< 64'. */
  goal: string;
  pass: boolean;
}

/** What each benchmark section returns to bench/run.ts. */
export interface Result {
  section: string;
  description: string;
  settings: Record<string, unknown>;
  runs: RunStats[];
  targets: TargetSummary[];
  comparisons: Comparison[];
  /** Goals that are not a throughput ratio (a latency, a memory growth); BENCH_STRICT counts them too. */
  checks?: Check[];
  /** The section's key figures in one line each, repeated in the summary. */
  headlines?: string[];
  /** When the section finished (set by bench/run.ts). */
  finishedAt?: string;
  /** Section-specific figures (stage breakdowns, CPU use, ...), kept in the JSON as they are. */
  details?: Record<string, unknown>;
}
