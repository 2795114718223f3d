/**
 * Smart Turn v3.2 (BSD-2; `smart-turn-v3.2-cpu.onnx` of PyPI `pipecat-ai`, put under
 * `<models dir>/smart-turn/` by `npm run models:fetch`): from the sound of the last
 * seconds of a turn (intonation, a word left hanging), the probability that the speaker
 * has finished. Used as the semantic end-of-turn signal beside the VAD's short hang-over
 * (domain/voice/turn-taking.ts).
 *
 * - Input: the turn's audio, upsampled to 16 kHz (predict8k: in the thread), the last 8 s of it (zeros before a
 *   shorter one), as Whisper-style log-mel features `input_features [1, 80, 800]`: the
 *   waveform normalized to zero mean and unit variance, a centred (reflect-padded) STFT
 *   of 400 samples every 160 with a periodic Hann window, power through an 80-band
 *   Slaney mel filterbank (0-8 kHz), log10 floored at 1e-10, the last frame dropped,
 *   clamped to 8 below its maximum, then (x + 4) / 4 — as pipecat's
 *   `_whisper_features.py` (transformers' WhisperFeatureExtractor) computes them.
 *   Output: `[1, 1]`, the probability the turn is complete.
 * - One worker_thread per process holds the session (1 intra-op, 1 inter-op thread) and
 *   computes the features (~40-80 ms for a few seconds of speech, plus the model's
 *   40-75 ms): the event loop that paces calls' audio never waits for it. Requests are
 *   answered one at a time, in order.
 */
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { upsamplePlan, UPSAMPLE_SOURCE, type UpsamplePlan } from './audio';

/** The thread's code: plain JS, so it runs under tsx, Jest and a build alike. */
const THREAD_SOURCE = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
const N_FFT = 400, HOP = 160, N_MELS = 80, RATE = 16000, SAMPLES = RATE * 8, FRAMES = SAMPLES / HOP;
const BINS = N_FFT / 2 + 1;

const hzToMel = (f) => (f >= 1000 ? 15 + Math.log(f / 1000) * (27 / Math.log(6.4)) : (3 * f) / 200);
const melToHz = (m) => (m >= 15 ? 1000 * Math.exp((Math.log(6.4) / 27) * (m - 15)) : (200 * m) / 3);
// Slaney filterbank [BINS][N_MELS], area-normalized.
const filterFreqs = Array.from({ length: N_MELS + 2 }, (_, i) => melToHz(hzToMel(0) + ((hzToMel(RATE / 2) - hzToMel(0)) * i) / (N_MELS + 1)));
const mel = new Float64Array(BINS * N_MELS);
for (let b = 0; b < BINS; b++) {
  const f = ((RATE / 2) * b) / (BINS - 1);
  for (let m = 0; m < N_MELS; m++) {
    const down = (f - filterFreqs[m]) / (filterFreqs[m + 1] - filterFreqs[m]);
    const up = (filterFreqs[m + 2] - f) / (filterFreqs[m + 2] - filterFreqs[m + 1]);
    mel[b * N_MELS + m] = Math.max(0, Math.min(down, up)) * (2 / (filterFreqs[m + 2] - filterFreqs[m]));
  }
}
const hann = Float64Array.from({ length: N_FFT }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / N_FFT));
const cos = new Float64Array(BINS * N_FFT), sin = new Float64Array(BINS * N_FFT);
for (let k = 0; k < BINS; k++) for (let n = 0; n < N_FFT; n++) {
  cos[k * N_FFT + n] = Math.cos((2 * Math.PI * k * n) / N_FFT);
  sin[k * N_FFT + n] = Math.sin((2 * Math.PI * k * n) / N_FFT);
}

/** Log-mel of one frame (N_FFT windowed samples) into out[m * FRAMES + t]. */
function melFrame(frame, out, t) {
  const power = new Float64Array(BINS);
  for (let k = 0; k < BINS; k++) {
    let re = 0, im = 0;
    const o = k * N_FFT;
    for (let n = 0; n < N_FFT; n++) { re += frame[n] * cos[o + n]; im -= frame[n] * sin[o + n]; }
    power[k] = re * re + im * im;
  }
  for (let m = 0; m < N_MELS; m++) {
    let s = 0;
    for (let k = 0; k < BINS; k++) s += mel[k * N_MELS + m] * power[k];
    out[m * FRAMES + t] = Math.log10(Math.max(1e-10, s));
  }
}

function features(audio) {
  // The last 8 s, zeros before.
  const x = new Float32Array(SAMPLES);
  const take = Math.min(audio.length, SAMPLES);
  x.set(audio.subarray(audio.length - take), SAMPLES - take);
  let mean = 0;
  for (let i = 0; i < SAMPLES; i++) mean += x[i];
  mean /= SAMPLES;
  let variance = 0;
  for (let i = 0; i < SAMPLES; i++) variance += (x[i] - mean) ** 2;
  variance /= SAMPLES;
  const sd = Math.sqrt(variance + 1e-7);
  for (let i = 0; i < SAMPLES; i++) x[i] = (x[i] - mean) / sd;
  const pad = N_FFT / 2;
  const at = (i) => { // reflect padding
    const j = i - pad;
    return x[j < 0 ? -j : j >= SAMPLES ? 2 * (SAMPLES - 1) - j : j];
  };
  const out = new Float32Array(N_MELS * FRAMES);
  const frame = new Float64Array(N_FFT);
  // Frames wholly inside the leading padding are all the same: computed once.
  const firstReal = SAMPLES - take;
  let constantDone = -1;
  for (let t = 0; t < FRAMES; t++) {
    const start = t * HOP;
    if (start - pad + N_FFT <= firstReal && start - pad >= 0 && constantDone >= 0) {
      for (let m = 0; m < N_MELS; m++) out[m * FRAMES + t] = out[m * FRAMES + constantDone];
      continue;
    }
    for (let n = 0; n < N_FFT; n++) frame[n] = at(start + n) * hann[n];
    melFrame(frame, out, t);
    if (start - pad >= 0 && start - pad + N_FFT <= firstReal) constantDone = t;
  }
  let max = -Infinity;
  for (let i = 0; i < out.length; i++) max = Math.max(max, out[i]);
  for (let i = 0; i < out.length; i++) out[i] = (Math.max(out[i], max - 8) + 4) / 4;
  return out;
}

${UPSAMPLE_SOURCE}

let session;
const ready = ort.InferenceSession.create(workerData.file, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all' })
  .then((s) => { session = s; });
let chain = ready;
parentPort.on('message', (msg) => {
  chain = chain.then(async () => {
    try {
      const t0 = performance.now();
      // A turn at 8 kHz is upsampled here, off the event loop that paces calls' audio (upsampleWithPlan: upsample's own loop).
      const audio = msg.pcm ? upsampleWithPlan(msg.pcm, msg.plan, 0, 0) : msg.audio;
      const input = features(audio);
      const t1 = performance.now();
      const out = await session.run({ input_features: new ort.Tensor('float32', input, [1, N_MELS, FRAMES]) });
      parentPort.postMessage({ id: msg.id, probability: out[session.outputNames[0]].data[0], featuresMs: t1 - t0, modelMs: performance.now() - t1 });
    } catch (err) {
      parentPort.postMessage({ id: msg.id, error: String(err && err.message || err) });
    }
  });
});
ready.catch((err) => parentPort.postMessage({ id: 0, error: 'Smart Turn model could not be loaded: ' + (err && err.message || err) }));
`;

export interface TurnPrediction {
  /** Probability the speaker has finished (Smart Turn's output). */
  probability: number;
  featuresMs: number;
  modelMs: number;
}

/** The process's Smart Turn thread. */
export class SmartTurn {
  private static shared = new Map<string, SmartTurn>();
  private readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (p: TurnPrediction) => void; reject: (e: Error) => void }>();

  private constructor(readonly file: string) {
    this.worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { file, ortPath: require.resolve('onnxruntime-node') } });
    this.worker.on('message', (m: { id: number; error?: string } & TurnPrediction) => {
      if (m.id === 0) {
        for (const p of this.pending.values()) p.reject(new Error(m.error));
        this.pending.clear();
        return;
      }
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error));
      else p?.resolve(m);
    });
    this.worker.on('error', (err) => {
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      SmartTurn.shared.delete(file);
    });
    // After the listeners (adding one references the thread again): it never keeps the process alive.
    this.worker.unref();
  }

  /** The process's one Smart Turn for `file` (its thread started on first use); null when the file is missing. */
  static for(file: string): SmartTurn | null {
    if (!fs.existsSync(file)) return null;
    let s = SmartTurn.shared.get(file);
    if (!s) SmartTurn.shared.set(file, (s = new SmartTurn(file)));
    return s;
  }

  /** `audio`: the turn at 16 kHz, float -1..1 (the last 8 s are used). */
  predict(audio: Float32Array): Promise<TurnPrediction> {
    return this.ask({ audio });
  }

  /**
   * `samples`: the turn at 8 kHz (a call's leg), as 16-bit PCM. The same prediction as predict(upsample(samples, 2)),
   * but upsampled in the model's thread, not on the event loop that paces calls' audio; the samples are copied and
   * the copy's buffer handed over (the caller keeps its array).
   */
  predict8k(samples: Int16Array): Promise<TurnPrediction> {
    const pcm = samples.slice();
    return this.ask({ pcm, plan: upsamplePlan(2) }, [pcm.buffer]);
  }

  private ask(input: { audio: Float32Array } | { pcm: Int16Array; plan: UpsamplePlan }, transfer: ArrayBuffer[] = []): Promise<TurnPrediction> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, ...input }, transfer);
    });
  }

  /** Ends every Smart Turn thread (tests, shutdown). */
  static async unloadAll(): Promise<void> {
    const all = [...SmartTurn.shared.values()];
    SmartTurn.shared.clear();
    await Promise.all(all.map((s) => s.worker.terminate()));
  }
}
