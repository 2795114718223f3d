/**
 * Band-limited sample-rate conversion (a polyphase Kaiser-windowed sinc), for speech
 * synthesized at one rate and played at another: Piper's 22,050 Hz down to the media
 * rate (8 kHz for G.711 on the phone and on the browser's leg).
 *
 * Each output sample is the input convolved with a low-pass sinc centred on the output's
 * position: the filter cuts at the lower of the two Nyquist frequencies, so what lies above
 * the new rate's half (a fricative's 4-11 kHz at 22.05 kHz) is removed rather than folded
 * back into the telephone band as aliasing, and nothing is imaged above the old one when
 * the rate goes up. Kaiser window with beta 8 (stop band about -80 dB); the transition band
 * ends at the new Nyquist frequency and is 1/16 of the lower rate wide (8 kHz: the pass
 * band reaches 3.5 kHz, flat within 0.1 dB; everything from 4 kHz up is stopped).
 *
 * For a rational ratio L/M (22050 → 8000 is 160/441) the output positions fall on L
 * phases, whose weights are computed once per rate pair and kept (L × taps floats).
 * Converting a second of 22.05 kHz speech to 8 kHz costs about 1.8 M multiply-adds.
 *
 * (lib/audio/audio.ts's `resample`, a short Hamming low-pass and linear interpolation, stays
 * for what it serves: audio taken in, where a few dB of roll-off at 3 kHz do not matter.)
 */

/** Zeroth-order modified Bessel function of the first kind (the Kaiser window's). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);

const KAISER_BETA = 8;
/** Transition band width, as a share of the lower rate. */
const TRANSITION = 1 / 16;
/** Phases precomputed at most; a ratio with more (an odd rate pair) computes its weights per sample. */
const MAX_PHASES = 2048;

/** The weights of one rate pair, for code that applies them elsewhere (a worker thread: see providers/speech/piper.ts). */
export interface SincPlan {
  /** L and M of the ratio L/M = toRate/fromRate, in lowest terms. */
  up: number;
  down: number;
  /** Taps on each side of the centre: phase p (output at input position i + p/L) weighs inputs i-half+1 .. i+half. */
  half: number;
  /** L rows of 2·half weights; null when the ratio has too many phases to keep. */
  table: Float32Array | null;
}

interface Plan extends SincPlan {
  weights: (frac: number, out: Float64Array) => void;
}

const plans = new Map<string, Plan>();

function planFor(fromRate: number, toRate: number): Plan {
  const key = `${fromRate}:${toRate}`;
  const cached = plans.get(key);
  if (cached) return cached;
  const g = gcd(fromRate, toRate);
  const up = toRate / g;
  const down = fromRate / g;
  const low = Math.min(fromRate, toRate);
  // Cut-off (-6 dB) half a transition band below the lower Nyquist frequency, in cycles per input sample.
  const stop = low / 2;
  const width = low * TRANSITION;
  const fc = (stop - width / 2) / fromRate;
  // Kaiser's estimate of the length for ~80 dB of stop band: (A - 8) / (2.285 · Δω).
  const deltaOmega = (2 * Math.PI * width) / fromRate;
  const half = Math.ceil((80 - 8) / (2.285 * deltaOmega) / 2) + 1;
  const i0Beta = besselI0(KAISER_BETA);
  const weights = (frac: number, out: Float64Array) => {
    let sum = 0;
    for (let k = 0; k < 2 * half; k++) {
      // Input i - half + 1 + k sits at distance d from the output position i + frac.
      const d = k - half + 1 - frac;
      const u = d / half;
      const w = Math.abs(u) >= 1 ? 0 : besselI0(KAISER_BETA * Math.sqrt(1 - u * u)) / i0Beta;
      const x = 2 * fc * d;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      out[k] = 2 * fc * sinc * w;
      sum += out[k];
    }
    // Unity gain at DC for every phase (no ripple at the output rate from phase to phase).
    for (let k = 0; k < 2 * half; k++) out[k] /= sum;
  };
  let table: Float32Array | null = null;
  if (up <= MAX_PHASES) {
    table = new Float32Array(up * 2 * half);
    const row = new Float64Array(2 * half);
    for (let p = 0; p < up; p++) {
      weights(p / up, row);
      table.set(row, p * 2 * half);
    }
  }
  const plan = { up, down, half, table, weights };
  plans.set(key, plan);
  return plan;
}

/**
 * resampleSinc's inner loop as plain JavaScript source, for a worker thread's code (the speech threads are plain JS,
 * so they run under tsx, Jest and a build alike): defines `applySincPlan(x, plan)`, `x` any array of samples and
 * `plan` a sincPlan with its table, returning a Float32Array.
 */
export const SINC_PLAN_SOURCE = String.raw`
function applySincPlan(x, plan) {
  const { up, down, half, table } = plan;
  const taps = 2 * half;
  const n = x.length;
  const outLength = Math.round((n * up) / down);
  const out = new Float32Array(outLength);
  for (let j = 0; j < outLength; j++) {
    const pos = j * down;
    const i = Math.floor(pos / up);
    const base = (pos - i * up) * taps;
    const first = i - half + 1;
    const k0 = Math.max(0, -first), k1 = Math.min(taps, n - first);
    let acc = 0;
    for (let k = k0; k < k1; k++) acc += table[base + k] * x[first + k];
    out[j] = acc;
  }
  return out;
}
`;

/** The plan (weights) of a rate pair, computed once and kept. */
export function sincPlan(fromRate: number, toRate: number): SincPlan {
  const { up, down, half, table } = planFor(fromRate, toRate);
  return { up, down, half, table };
}

/**
 * `samples` (any scale) at `fromRate` converted to `toRate`, band-limited as above. One-shot,
 * for a whole utterance (the signal is taken as silent before and after); the result has
 * round(n × toRate / fromRate) samples, aligned with the input (no delay).
 */
export function resampleSinc(samples: Float32Array | Int16Array, fromRate: number, toRate: number): Float32Array {
  if (!(Number.isInteger(fromRate) && Number.isInteger(toRate) && fromRate > 0 && toRate > 0)) throw new RangeError('sample rates must be positive integers');
  const n = samples.length;
  if (fromRate === toRate) return Float32Array.from(samples);
  const { up, down, half, table, weights } = planFor(fromRate, toRate);
  const outLength = Math.round((n * toRate) / fromRate);
  const out = new Float32Array(outLength);
  const taps = 2 * half;
  const row = table ? null : new Float64Array(taps);
  for (let j = 0; j < outLength; j++) {
    // Output j sits at input position j·M/L = i + p/L.
    const pos = j * down;
    const i = Math.floor(pos / up);
    const p = pos - i * up;
    let base = 0;
    let w: Float32Array | Float64Array;
    if (table) {
      w = table;
      base = p * taps;
    } else {
      weights(p / up, row!);
      w = row!;
    }
    const first = i - half + 1;
    const k0 = Math.max(0, -first);
    const k1 = Math.min(taps, n - first);
    let acc = 0;
    for (let k = k0; k < k1; k++) acc += w[base + k] * samples[first + k];
    out[j] = acc;
  }
  return out;
}

/** resampleSinc to 16-bit PCM, `scale` multiplying first (32767 for float samples in [-1, 1]), clipped. */
export function resampleSincToInt16(samples: Float32Array | Int16Array, fromRate: number, toRate: number, scale = 1): Int16Array {
  const f = resampleSinc(samples, fromRate, toRate);
  const out = new Int16Array(f.length);
  for (let i = 0; i < f.length; i++) {
    const v = Math.round(f[i] * scale);
    out[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return out;
}
