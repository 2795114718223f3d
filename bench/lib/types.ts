/** What one measured run of one target gave (round 0: a warm-up). */
export interface RunStats {
  target: string;
  round: number;
  durationSeconds: number;
  connections: number;
  requestsPerSec: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  latencyMeanMs: number;
  totalRequests: number;
  statusCodes: Record<string, number>;
}

/** A target's aggregate over its measured rounds; the ratios use the mean. */
export interface TargetSummary {
  target: string;
  rounds: number;
  meanRequestsPerSec: number;
  bestRequestsPerSec: number;
  meanLatencyP50Ms: number;
  meanLatencyP99Ms: number;
}

/** One "subject vs baseline" line of the summary: ratio of the means, per round (noise), best/best. */
export interface Comparison {
  name: string;
  subject: string;
  baseline: string;
  subjectRequestsPerSec: number;
  baselineRequestsPerSec: number;
  ratio: number;
  roundRatios: number[];
  bestRatio: number;
  /** The ratio must be at least this. */
  target: number;
  pass: boolean;
  /** What the rates count (default 'req/s'), e.g. 'deliveries/s'. */
  subjectUnit?: string;
  baselineUnit?: string;
}

/** One figure against a goal, e.g. RSS growth 38 MB against '< 64'. */
export interface Check {
  name: string;
  value: number;
  unit: string;
  goal: string;
  pass: boolean;
}

/** What each section returns to bench/run.ts (`details`: section-specific figures, kept in the JSON as they are; runs, targets and comparisons left out are empty). */
export interface Result {
  section: string;
  description: string;
  settings: Record<string, unknown>;
  runs?: RunStats[];
  targets?: TargetSummary[];
  comparisons?: Comparison[];
  checks?: Check[];
  headlines?: string[];
  finishedAt?: string;
  details?: Record<string, unknown>;
}
