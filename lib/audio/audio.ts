/**
 * Audio arithmetic for the voice pipeline, dependency-free: G.711 (μ-law for PCMU, A-law
 * for PCMA), sample-rate conversion, Int16 ↔ Float32, loudness, and the WAV container
 * (what espeak-ng and OpenAI-compatible speech servers answer, and what tests write).
 *
 * Everything here works on 16-bit signed PCM in Int16Array, the service's one format
 * (types.ts); other rates appear only at the edges (STT wants 16 kHz, TTS engines answer
 * 22.05/24 kHz, WebRTC/LiveKit runs at 48 kHz).
 */
import { definedBy } from '../process/plain-source';

// ---------------------------------------------------------------------------------------
// G.711 (ITU-T G.711; the segment arithmetic of the reference implementation, Sun's g711.c)

const MULAW_BIAS = 0x84;
const MULAW_CLIP = 32635;

/** μ-law code of one 16-bit sample (0 → 0xFF; the sign bit and all bits inverted, as on the wire). */
function linearToMulaw(sample: number): number {
  let pcm = sample;
  const sign = pcm < 0 ? 0x80 : 0;
  if (sign) pcm = -pcm;
  if (pcm > MULAW_CLIP) pcm = MULAW_CLIP;
  pcm += MULAW_BIAS;
  // The segment (exponent) is the position of the highest set bit above bit 7.
  let exponent = 7;
  for (let mask = 0x4000; (pcm & mask) === 0 && exponent > 0; mask >>= 1) exponent--;
  const mantissa = (pcm >> (exponent + 3)) & 0x0f;
  return ~(sign | (exponent << 4) | mantissa) & 0xff;
}

function mulawToLinear(code: number): number {
  const u = ~code & 0xff;
  const exponent = (u >> 4) & 0x07;
  const sample = ((((u & 0x0f) << 3) + MULAW_BIAS) << exponent) - MULAW_BIAS;
  return u & 0x80 ? -sample : sample;
}

const ALAW_SEG_END = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];

/** A-law code of one 16-bit sample (0 → 0xD5; even bits inverted, as on the wire). */
function linearToAlaw(sample: number): number {
  let pcm = sample >> 3;
  let mask: number;
  if (pcm >= 0) mask = 0xd5;
  else {
    mask = 0x55;
    pcm = -pcm - 1;
  }
  let seg = 0;
  while (seg < 8 && pcm > ALAW_SEG_END[seg]) seg++;
  if (seg >= 8) return 0x7f ^ mask;
  const aval = (seg << 4) | (seg < 2 ? (pcm >> 1) & 0x0f : (pcm >> seg) & 0x0f);
  return aval ^ mask;
}

function alawToLinear(code: number): number {
  const a = code ^ 0x55;
  let t = (a & 0x0f) << 4;
  const seg = (a & 0x70) >> 4;
  if (seg === 0) t += 8;
  else if (seg === 1) t += 0x108;
  else t = (t + 0x108) << (seg - 1);
  return a & 0x80 ? t : -t;
}

// Tables: 64 KiB per encoder and 512 B per decoder, so a 20 ms frame is 160 lookups.
const MULAW_DECODE = Int16Array.from({ length: 256 }, (_, c) => mulawToLinear(c));
const ALAW_DECODE = Int16Array.from({ length: 256 }, (_, c) => alawToLinear(c));
const MULAW_ENCODE = Uint8Array.from({ length: 65536 }, (_, i) => linearToMulaw(i - 32768));
const ALAW_ENCODE = Uint8Array.from({ length: 65536 }, (_, i) => linearToAlaw(i - 32768));

/** PCM → μ-law bytes (PCMU payload), one byte a sample. */
export function encodeMulaw(samples: Int16Array): Uint8Array {
  const out = new Uint8Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = MULAW_ENCODE[samples[i] + 32768];
  return out;
}

/** μ-law bytes (PCMU payload) → PCM. */
export function decodeMulaw(codes: Uint8Array): Int16Array {
  const out = new Int16Array(codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = MULAW_DECODE[codes[i]];
  return out;
}

/** PCM → A-law bytes (PCMA payload). */
export function encodeAlaw(samples: Int16Array): Uint8Array {
  const out = new Uint8Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = ALAW_ENCODE[samples[i] + 32768];
  return out;
}

/** A-law bytes (PCMA payload) → PCM. */
export function decodeAlaw(codes: Uint8Array): Int16Array {
  const out = new Int16Array(codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = ALAW_DECODE[codes[i]];
  return out;
}

// ---------------------------------------------------------------------------------------
// Sample formats and loudness

/** Int16 → Float32 in [-1, 1) (what whisper.cpp and Web Audio take). */
export function int16ToFloat32(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i] / 32768;
  return out;
}

/** Float32 → Int16, rounded and clipped (a float slightly past ±1 does not wrap around). */
export function float32ToInt16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = clip16(Math.round(samples[i] * 32768));
  return out;
}

function clip16(v: number): number {
  return v > 32767 ? 32767 : v < -32768 ? -32768 : v;
}

/** Root mean square of the samples relative to full scale (0 … 1). */
export function rms(samples: Int16Array): number {
  if (!samples.length) return 0;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return Math.sqrt(sum / samples.length) / 32768;
}

/** Loudness in dBFS (RMS relative to full scale: a full-scale sine is about -3 dBFS; digital silence is -Infinity). */
export function dbfs(samples: Int16Array): number {
  return 20 * Math.log10(rms(samples));
}

/** Interleaved stereo → mono by averaging the channels (any channel count). */
export function downmix(interleaved: Int16Array, channels: number): Int16Array {
  if (channels === 1) return interleaved;
  const frames = Math.floor(interleaved.length / channels);
  const out = new Int16Array(frames);
  for (let f = 0; f < frames; f++) {
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += interleaved[f * channels + c];
    out[f] = Math.round(sum / channels);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Sample-rate conversion

/**
 * Low-pass kernel (Hamming-windowed sinc) that keeps what survives a conversion down to
 * `toRate`: cut at 45 % of the new rate, so the band above the new Nyquist frequency does
 * not fold back as aliasing (espeak's fricatives at 22.05 kHz would, at 8 kHz). The length
 * grows with the ratio so the transition band stays about as narrow at 48 → 8 kHz.
 */
function lowPassKernel(fromRate: number, toRate: number): Float64Array {
  const taps = 2 * Math.ceil((8 * fromRate) / toRate) + 1;
  const fc = (0.45 * toRate) / fromRate;
  const m = (taps - 1) / 2;
  const h = new Float64Array(taps);
  let sum = 0;
  for (let k = 0; k < taps; k++) {
    const x = k - m;
    const sinc = x === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * x) / (Math.PI * x);
    h[k] = sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * k) / (taps - 1)));
    sum += h[k];
  }
  for (let k = 0; k < taps; k++) h[k] /= sum;
  return h;
}

/**
 * Upsampling by a whole factor (8 → 16 kHz for the speech-to-text models) as float32 in
 * [-1, 1]: zeros stuffed between the samples, then a Hamming-windowed sinc low-pass (65 taps
 * at 2×) cut at 45 % of the old rate, so nothing is added above the old Nyquist frequency.
 * Linear interpolation (resample) leaves images of the speech band at 4-8 kHz, which a model
 * trained on wideband audio hears as noise: Moonshine mis-heard 69 % of the words of
 * espeak-ng questions at 8 kHz linearly upsampled, 32 % this way (the same speech at 16 kHz: 12 %).
 * The loop is UPSAMPLE_SOURCE's, which the speech threads run too.
 */
export function upsample(samples: Int16Array, factor: number): Float32Array {
  return upsampleWithPlan(samples, upsamplePlan(factor), 0, 0);
}

/** upsample's filter for one factor, for code that applies it elsewhere (a worker thread: UPSAMPLE_SOURCE). */
export interface UpsamplePlan {
  factor: number;
  /** The filter's `factor` phases (see upsamplingPhases). */
  phases: Float64Array[];
}

/** The plan of `factor` (its phases computed once and kept). */
export function upsamplePlan(factor: number): UpsamplePlan {
  return { factor, phases: upsamplingPhases(factor) };
}

/**
 * upsample as plain JavaScript source, for a worker thread's code (the speech threads are plain JS, so they run
 * under tsx, Jest and a build alike): defines `upsampleWithPlan(samples, plan, padBefore, padAfter)`, `samples` an
 * Int16Array and `plan` an upsamplePlan, returning a Float32Array of `padBefore` zeros, upsample(samples, factor)'s
 * samples (the same, bit for bit: the same operations in the same order), then `padAfter` zeros. The speech-to-text
 * and Smart Turn threads upsample a turn themselves: on the voice worker's main thread it took 30-90 ms of the event
 * loop at 4 sessions, the 20 ms pacing of every call's audio waiting.
 */
export const UPSAMPLE_SOURCE = String.raw`
function upsampleWithPlan(samples, plan, padBefore, padAfter) {
  const { factor, phases } = plan;
  const n = samples.length;
  const length = n * factor;
  const out = new Float32Array(padBefore + length + padAfter);
  const m = (32 * factor) / 2;
  for (let o = 0; o < length; o++) {
    const j0 = o + m;
    const g = phases[j0 % factor];
    const J = (j0 - (j0 % factor)) / factor;
    const t0 = Math.max(0, J - n + 1);
    const t1 = Math.min(g.length, J + 1);
    let acc = 0;
    for (let t = t0; t < t1; t++) acc += g[t] * samples[J - t];
    out[padBefore + o] = acc;
  }
  return out;
}
`;

const upsampleWithPlan = definedBy<(samples: Int16Array, plan: UpsamplePlan, padBefore: number, padAfter: number) => Float32Array>(UPSAMPLE_SOURCE, 'upsampleWithPlan');

const phaseFilters = new Map<number, Float64Array[]>();

/** upsample's filter (Hamming-windowed sinc, 32·factor + 1 taps) split into its `factor` phases, computed once per factor. */
function upsamplingPhases(factor: number): Float64Array[] {
  const cached = phaseFilters.get(factor);
  if (cached) return cached;
  const taps = 32 * factor + 1;
  const fc = 0.45 / factor;
  const m = (taps - 1) / 2;
  const h = new Float64Array(taps);
  let sum = 0;
  for (let k = 0; k < taps; k++) {
    const x = k - m;
    const sinc = x === 0 ? 2 * fc : Math.sin(2 * Math.PI * fc * x) / (Math.PI * x);
    h[k] = sinc * (0.54 - 0.46 * Math.cos((2 * Math.PI * k) / (taps - 1)));
    sum += h[k];
  }
  // A gain of `factor`: the stuffed zeros take that much of the signal's level away.
  for (let k = 0; k < taps; k++) h[k] = (h[k] * factor) / sum / 32768;
  const phases = Array.from({ length: factor }, (_, r) => Float64Array.from({ length: Math.ceil((taps - r) / factor) }, (_, t) => h[r + t * factor]));
  phaseFilters.set(factor, phases);
  return phases;
}

/**
 * Converts between rates (8k ↔ 16k ↔ 22.05k ↔ 24k ↔ 48k, or any other pair) by linear
 * interpolation, low-passed first when the rate goes down. One-shot, for a whole
 * utterance; a stream of frames uses StreamResampler (no clicks at frame edges).
 */
export function resample(samples: Int16Array, fromRate: number, toRate: number): Int16Array {
  if (fromRate === toRate) return samples.slice();
  const r = new StreamResampler(fromRate, toRate);
  const head = r.push(samples);
  const tail = r.flush();
  const out = new Int16Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  // The length is exactly the duration at the new rate (flush may produce one more).
  return out.slice(0, Math.round((samples.length * toRate) / fromRate));
}

/**
 * Rate conversion of a stream pushed in chunks of any size (20 ms frames from a leg):
 * the filter's history and the interpolation phase carry over between chunks, so the
 * output is the same as converting the whole stream at once. Positions are kept as exact
 * integers (input index × toRate), so a long call never drifts.
 */
export class StreamResampler {
  private readonly kernel: Float64Array | null;
  /** Input samples not yet consumed by the filter (its history), as floats. */
  private history: Float64Array;
  /** Filtered samples before the current chunk: the last one (for interpolation). */
  private last = 0;
  /** Position of the next output sample, in input samples × toRate, relative to the current chunk's start. */
  private num = 0;
  private flushed = false;

  constructor(
    readonly fromRate: number,
    readonly toRate: number,
  ) {
    if (!(fromRate > 0 && toRate > 0)) throw new RangeError('sample rates must be positive');
    this.kernel = toRate < fromRate ? lowPassKernel(fromRate, toRate) : null;
    const delay = this.kernel ? (this.kernel.length - 1) / 2 : 0;
    this.history = new Float64Array(this.kernel ? this.kernel.length - 1 : 0);
    // The filter's output lags its input by `delay` samples: start interpolating that far in.
    this.num = delay * toRate;
  }

  /** Converts one chunk; returns the output samples it completes (possibly none). */
  push(chunk: Int16Array): Int16Array {
    if (this.flushed) throw new Error('the resampler was flushed');
    return this.process(chunk);
  }

  /**
   * Ends the stream: pushes the filter's delay of silence through (or, without a filter,
   * holds the last sample once), so the outputs that waited for a next chunk come out.
   */
  flush(): Int16Array {
    if (this.flushed) return new Int16Array(0);
    this.flushed = true;
    return this.process(this.kernel ? new Int16Array(this.history.length / 2 + 1) : Int16Array.of(clip16(Math.round(this.last))));
  }

  private process(chunk: Int16Array): Int16Array {
    const filtered = this.filter(chunk);
    const n = filtered.length;
    const out: number[] = [];
    const { fromRate, toRate } = this;
    // Output k sits at input position num / toRate; index -1 is `last` (the previous chunk's end).
    while (this.num < n * toRate) {
      const i = Math.floor(this.num / toRate);
      const frac = (this.num - i * toRate) / toRate;
      // An output between this chunk's last sample and the next chunk's first waits for that chunk.
      if (frac > 0 && i + 1 >= n) break;
      const a = i < 0 ? this.last : filtered[i];
      const b = frac > 0 ? filtered[i + 1] : a;
      out.push(a + frac * (b - a));
      this.num += fromRate;
    }
    if (n) this.last = filtered[n - 1];
    this.num -= n * toRate;
    const result = new Int16Array(out.length);
    for (let k = 0; k < out.length; k++) result[k] = clip16(Math.round(out[k]));
    return result;
  }

  /** The chunk low-passed (causal FIR over history + chunk); unchanged when the rate goes up. */
  private filter(chunk: Int16Array): Float64Array {
    const h = this.kernel;
    if (!h) return Float64Array.from(chunk);
    const hist = this.history;
    const all = new Float64Array(hist.length + chunk.length);
    all.set(hist);
    for (let i = 0; i < chunk.length; i++) all[hist.length + i] = chunk[i];
    const out = new Float64Array(chunk.length);
    const taps = h.length;
    for (let i = 0; i < chunk.length; i++) {
      let acc = 0;
      for (let k = 0; k < taps; k++) acc += h[k] * all[i + k];
      out[i] = acc;
    }
    this.history = all.slice(all.length - hist.length);
    return out;
  }
}

// ---------------------------------------------------------------------------------------
// WAV

export interface WavAudio {
  sampleRate: number;
  channels: number;
  /** Interleaved 16-bit samples (frames × channels). */
  samples: Int16Array;
}

/** A WAV file that is not 16-bit PCM or is broken. */
export class WavFormatError extends Error {
  override readonly name = 'WavFormatError';
}

const WAVE_FORMAT_PCM = 1;
const WAVE_FORMAT_EXTENSIBLE = 0xfffe;

/**
 * Parses a RIFF/WAVE file of 16-bit PCM (plain or WAVE_FORMAT_EXTENSIBLE), any rate and
 * channel count. Streaming writers (espeak-ng --stdout, OpenAI's wav) put a placeholder
 * size (0x7FFFFFFF or 0xFFFFFFFF) in the RIFF and data headers since they do not know the
 * length when they start: the data then runs to the end of the bytes.
 */
export function parseWav(bytes: Uint8Array): WavAudio {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') {
    throw new WavFormatError('not a WAV file (no RIFF/WAVE header)');
  }
  let fmt: { format: number; channels: number; sampleRate: number; bits: number } | null = null;
  let offset = 12;
  while (offset + 8 <= buf.length) {
    const id = buf.toString('ascii', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ') {
      if (size < 16 || body + 16 > buf.length) throw new WavFormatError('WAV fmt chunk is truncated');
      let format = buf.readUInt16LE(body);
      // WAVE_FORMAT_EXTENSIBLE names the real format in the first two bytes of its sub-format GUID.
      if (format === WAVE_FORMAT_EXTENSIBLE && size >= 40 && body + 26 <= buf.length) format = buf.readUInt16LE(body + 24);
      fmt = { format, channels: buf.readUInt16LE(body + 2), sampleRate: buf.readUInt32LE(body + 4), bits: buf.readUInt16LE(body + 14) };
    } else if (id === 'data') {
      if (!fmt) throw new WavFormatError('WAV data before its fmt chunk');
      if (fmt.format !== WAVE_FORMAT_PCM || fmt.bits !== 16) throw new WavFormatError(`WAV is not 16-bit PCM (format ${fmt.format}, ${fmt.bits} bits)`);
      if (fmt.channels < 1 || fmt.sampleRate < 1) throw new WavFormatError('WAV has no channels or no sample rate');
      const end = Math.min(buf.length, body + size);
      const frameBytes = 2 * fmt.channels;
      const length = Math.floor((end - body) / frameBytes) * fmt.channels;
      // A copy: aligned for Int16Array whatever the data chunk's offset, and independent of `bytes`.
      const samples = new Int16Array(length);
      for (let i = 0; i < length; i++) samples[i] = buf.readInt16LE(body + 2 * i);
      return { sampleRate: fmt.sampleRate, channels: fmt.channels, samples };
    }
    // Chunks are padded to an even size.
    offset = body + size + (size & 1);
  }
  throw new WavFormatError(fmt ? 'WAV has no data chunk' : 'WAV has no fmt chunk');
}

/** A 16-bit PCM WAV file of interleaved `samples`. */
export function encodeWav(samples: Int16Array, sampleRate: number, channels = 1): Buffer {
  const dataBytes = samples.length * 2;
  const out = Buffer.alloc(44 + dataBytes);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVE', 8, 'ascii');
  out.write('fmt ', 12, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(WAVE_FORMAT_PCM, 20);
  out.writeUInt16LE(channels, 22);
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * channels * 2, 28);
  out.writeUInt16LE(channels * 2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(dataBytes, 40);
  for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i], 44 + 2 * i);
  return out;
}

/** Parses a WAV and brings it to mono at `rate` (what the synthesizers hand the pipeline). */
export function wavToMono(bytes: Uint8Array, rate: number): Int16Array {
  const wav = parseWav(bytes);
  const mono = downmix(wav.samples, wav.channels);
  return wav.sampleRate === rate ? mono : resample(mono, wav.sampleRate, rate);
}

/** Int16 samples as little-endian bytes (a view when the platform is little-endian, which Node's are). */
export function pcmBytes(samples: Int16Array): Buffer {
  return Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
}

/** Little-endian PCM bytes as Int16 samples (copied: a Buffer's offset may be odd). */
export function pcmFromBytes(bytes: Uint8Array): Int16Array {
  const out = new Int16Array(Math.floor(bytes.byteLength / 2));
  new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 2));
  return out;
}

/** Frames joined into one run of samples. */
export function concatFrames(frames: Int16Array[]): Int16Array {
  const out = new Int16Array(frames.reduce((n, f) => n + f.length, 0));
  let at = 0;
  for (const f of frames) {
    out.set(f, at);
    at += f.length;
  }
  return out;
}
