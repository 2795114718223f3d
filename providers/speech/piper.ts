/**
 * The natural embedded voice: a Piper (VITS) voice on onnxruntime-node, with its phonemes
 * from the espeak-ng program (providers/speech/espeak-phonemes.ts), as Piper itself does it
 * (piper-phonemize), without linking espeak-ng in (GPL-3; this project is Apache-2.0).
 *
 * - The voice: `<name>.onnx` and `<name>.onnx.json` (npm run models:fetch puts
 *   en_US-joe-medium in `<models dir>/piper/en_US-joe-medium/`). The json gives the
 *   phoneme_id_map, the espeak voice, the sample rate (22,050 Hz for medium voices) and the
 *   inference scales (noise_scale, length_scale, noise_w).
 * - Phoneme ids as piper-phonemize makes them: BOS '^', then each phoneme (Unicode code
 *   point) of the sentence's IPA followed by the pad '_', then EOS '$'; a phoneme the map
 *   lacks is left out. The network's inputs: `input` int64 [1, n], `input_lengths` [n],
 *   `scales` float32 [noise_scale, length_scale, noise_w]; its output float32 audio.
 * - Each sentence is synthesized on its own and they are joined with 0.2 s of silence
 *   (Piper's default); the audio is peak-normalized as Piper does (to -2 dBFS here, with
 *   the gain capped so near-silence is not blown up) and converted to MEDIA_RATE with a
 *   Kaiser-windowed sinc (lib/audio/sinc-resample.ts: nothing above 4 kHz folds back into
 *   the telephone band). The same audio goes to the browser and to the phone.
 * - One worker_thread per voice and per process holds the InferenceSession (one intra-op
 *   and one inter-op thread), shared by every call: onnxruntime-node's session creation
 *   (~1-5 s) and its runs are synchronous on the calling thread, and the main event loop
 *   paces live audio. The resampling runs there too. Loading (and one short warm-up run)
 *   starts when the synthesizer is made (at start-up, when configured), so no caller waits for it.
 * - A voice whose files are missing is not used: `piperOrEspeak` answers espeak-ng instead
 *   and says so in the log; a voice that fails to load falls back to espeak-ng the same way,
 *   call by call, never failing the call for it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { SINC_PLAN_SOURCE, sincPlan } from '../../lib/audio/sinc-resample';
import { EspeakPhonemizer } from './espeak-phonemes';
import { EspeakSynthesizer, SpeechSynthesisError, type SpeechSynthesizer } from './tts';

/** The Piper voice npm run models:fetch provides (`<models dir>/piper/<name>/<name>.onnx`). */
export const DEFAULT_PIPER_VOICE = 'en_US-joe-medium';
/** Silence between two sentences (Piper's `--sentence_silence` default). */
const SENTENCE_SILENCE_S = 0.2;
/** Peak level of the normalized audio (-2 dBFS: G.711 has no headroom to spare). */
const PEAK = 0.8;
/** The largest gain normalization applies (near-silence stays quiet). */
const MAX_GAIN = 10;

/** What a voice's `.onnx.json` holds that synthesis needs. */
export interface PiperVoiceConfig {
  sampleRate: number;
  espeakVoice: string;
  noiseScale: number;
  lengthScale: number;
  noiseW: number;
  phonemeIdMap: Map<string, number[]>;
}

/** Parses a Piper voice config (`<voice>.onnx.json`). */
export function readPiperVoiceConfig(jsonFile: string): PiperVoiceConfig {
  const j = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as {
    audio?: { sample_rate?: number };
    espeak?: { voice?: string };
    inference?: { noise_scale?: number; length_scale?: number; noise_w?: number };
    phoneme_type?: string;
    phoneme_id_map?: Record<string, number[]>;
  };
  if (j.phoneme_type && j.phoneme_type !== 'espeak') throw new Error(`${jsonFile}: phoneme_type ${j.phoneme_type} is not supported (only espeak)`);
  if (!j.phoneme_id_map || !j.audio?.sample_rate) throw new Error(`${jsonFile}: not a Piper voice config (no phoneme_id_map or audio.sample_rate)`);
  return {
    sampleRate: j.audio.sample_rate,
    espeakVoice: j.espeak?.voice ?? 'en-us',
    noiseScale: j.inference?.noise_scale ?? 0.667,
    lengthScale: j.inference?.length_scale ?? 1,
    noiseW: j.inference?.noise_w ?? 0.8,
    phonemeIdMap: new Map(Object.entries(j.phoneme_id_map)),
  };
}

/** A sentence's IPA as the network's input ids (piper-phonemize's phonemes_to_ids: BOS, pad between, EOS). */
export function phonemeIds(phonemes: string, map: Map<string, number[]>): number[] {
  const pad = map.get('_') ?? [0];
  const ids = [...(map.get('^') ?? [1]), ...pad];
  for (const ph of phonemes) {
    const id = map.get(ph);
    if (!id) continue;
    ids.push(...id, ...pad);
  }
  ids.push(...(map.get('$') ?? [2]));
  return ids;
}

/** `<dir>/<voice>.onnx` for a voice name (found under `<models dir>/piper/<name>/`), or the path itself when it names a `.onnx` file. */
export function piperVoicePath(modelsDir: string, voice: string): string {
  return voice.endsWith('.onnx') ? path.resolve(voice) : path.join(modelsDir, 'piper', voice, `${voice}.onnx`);
}

/** The thread's code: plain JS, so it runs under tsx, Jest and a build alike. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
const { table } = workerData.plan;
let session;
const loading = (async () => {
  try {
    session = await ort.InferenceSession.create(workerData.model, { graphOptimizationLevel: 'all', intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
    // One short run before any caller's: the first run allocates what later ones reuse.
    const ids = workerData.warmIds;
    await session.run({
      input: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]),
      input_lengths: new ort.Tensor('int64', BigInt64Array.of(BigInt(ids.length)), [1]),
      scales: new ort.Tensor('float32', Float32Array.from(workerData.scales), [3]),
    });
    parentPort.postMessage({ ready: true });
  } catch (err) {
    parentPort.postMessage({ ready: false, error: String((err && err.message) || err) });
  }
})();

${SINC_PLAN_SOURCE}

const queue = [];
let busy = false;
async function drain() {
  if (busy) return;
  busy = true;
  await loading;
  while (queue.length) {
    const job = queue.shift();
    // A job cancelled while it waited is dropped (a run, once started, is short).
    if (Atomics.load(job.cancel, 0) === 1) { parentPort.postMessage({ id: job.id, cancelled: true }); continue; }
    try {
      const started = Date.now();
      const parts = [];
      for (const ids of job.sentences) {
        if (Atomics.load(job.cancel, 0) === 1) break;
        const r = await session.run({
          input: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, ids.length]),
          input_lengths: new ort.Tensor('int64', BigInt64Array.of(BigInt(ids.length)), [1]),
          scales: new ort.Tensor('float32', Float32Array.from(job.scales), [3]),
        });
        parts.push(r.output.data);
      }
      const modelMs = Date.now() - started;
      const gap = Math.round(job.silence * job.rate);
      let total = 0;
      for (const p of parts) total += p.length;
      total += gap * Math.max(0, parts.length - 1);
      const audio = new Float32Array(total);
      let at = 0, peak = 0;
      parts.forEach((p, k) => { if (k) at += gap; audio.set(p, at); at += p.length; });
      for (let i = 0; i < audio.length; i++) { const a = Math.abs(audio[i]); if (a > peak) peak = a; }
      const gain = (peak > 0 ? Math.min(job.maxGain, job.peak / peak) : 1) * 32767;
      const f = table ? applySincPlan(audio, workerData.plan) : audio;
      const pcm = new Int16Array(f.length);
      for (let i = 0; i < f.length; i++) { const v = Math.round(f[i] * gain); pcm[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v; }
      parentPort.postMessage({ id: job.id, pcm, modelMs, totalMs: Date.now() - started }, [pcm.buffer]);
    } catch (err) {
      parentPort.postMessage({ id: job.id, error: String((err && err.message) || err) });
    }
    await new Promise((r) => setImmediate(r));
  }
  busy = false;
}
parentPort.on('message', (job) => { queue.push(job); drain(); });
`;

/** What one synthesis cost (the benchmark reads these). */
export interface PiperStats {
  sentences: number;
  /** Time in the network (all sentences). */
  modelMs: number;
  /** Time in the thread: the network, normalization and resampling. */
  totalMs: number;
}

interface Job {
  resolve: (r: { pcm: Int16Array; modelMs: number; totalMs: number }) => void;
  reject: (err: unknown) => void;
}

/** One voice loaded in one thread, shared by every synthesizer of the process that names the same file. */
class PiperEngine {
  private static readonly engines = new Map<string, PiperEngine>();

  static for(modelFile: string, outRate: number): PiperEngine {
    const key = `${modelFile}@${outRate}`;
    let e = PiperEngine.engines.get(key);
    if (!e) {
      e = new PiperEngine(modelFile, outRate);
      PiperEngine.engines.set(key, e);
    }
    return e;
  }

  static async unloadAll(): Promise<void> {
    const all = [...PiperEngine.engines.values()];
    PiperEngine.engines.clear();
    await Promise.all(all.map((e) => e.worker.terminate()));
  }

  readonly voice: PiperVoiceConfig;
  /** Settles when the session is loaded; rejects when it cannot be. */
  readonly ready: Promise<void>;
  private readonly worker: Worker;
  private readonly jobs = new Map<number, Job>();
  private nextId = 1;
  private failure: Error | null = null;

  private constructor(
    readonly modelFile: string,
    readonly outRate: number,
  ) {
    this.voice = readPiperVoiceConfig(`${modelFile}.json`);
    const plan = this.voice.sampleRate === outRate ? { up: 1, down: 1, half: 0, table: null } : sincPlan(this.voice.sampleRate, outRate);
    if (this.voice.sampleRate !== outRate && !plan.table) throw new Error(`no resampling table for ${this.voice.sampleRate} → ${outRate} Hz`);
    this.worker = new Worker(THREAD_SOURCE, { eval: true, workerData: {
        model: modelFile,
        ortPath: require.resolve('onnxruntime-node'),
        plan,
        warmIds: phonemeIds('həlˈoʊ', this.voice.phonemeIdMap),
        scales: [this.voice.noiseScale, this.voice.lengthScale, this.voice.noiseW],
      },
    });
    let loaded: () => void;
    let notLoaded: (err: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      loaded = resolve;
      notLoaded = reject;
    });
    // Observed here so a failed load is never an unhandled rejection (synthesize reads `failure`).
    this.ready.catch(() => undefined);
    this.worker.on('message', (m: { ready?: boolean; error?: string; id?: number; pcm?: Int16Array; cancelled?: boolean; modelMs?: number; totalMs?: number }) => {
      if (m.id === undefined) {
        if (m.ready) loaded();
        else this.fail(new Error(`the Piper voice ${modelFile} did not load: ${m.error}`), notLoaded);
        return;
      }
      const job = this.jobs.get(m.id);
      if (!job) return;
      this.jobs.delete(m.id);
      if (m.pcm) job.resolve({ pcm: m.pcm, modelMs: m.modelMs ?? 0, totalMs: m.totalMs ?? 0 });
      else if (m.cancelled) job.reject(new DOMException('cancelled', 'AbortError'));
      else job.reject(new SpeechSynthesisError('Piper synthesis failed', true, { detail: m.error }));
    });
    this.worker.on('error', (err) => this.fail(new Error(`the Piper voice's thread failed: ${err.message}`), notLoaded));
    this.worker.on('exit', () => this.fail(new Error("the Piper voice's thread ended"), notLoaded));
    // The thread never keeps the process alive (it only serves calls that do): unreferenced after the listeners, as adding one references it again.
    this.worker.unref();
  }

  /** The load failed (or the thread ended): every waiting job fails, and later ones at once. */
  private fail(err: Error, notLoaded: (err: Error) => void): void {
    this.failure ??= err;
    notLoaded(err);
    for (const job of this.jobs.values()) job.reject(new SpeechSynthesisError('the Piper voice is not available', true, { detail: err.message }));
    this.jobs.clear();
    if (PiperEngine.engines.get(`${this.modelFile}@${this.outRate}`) === this) PiperEngine.engines.delete(`${this.modelFile}@${this.outRate}`);
    void this.worker.terminate();
  }

  get failed(): Error | null {
    return this.failure;
  }

  run(sentences: number[][], cancel: Int32Array): Promise<{ pcm: Int16Array; modelMs: number; totalMs: number }> {
    if (this.failure) return Promise.reject(new SpeechSynthesisError('the Piper voice is not available', true, { detail: this.failure.message }));
    const id = this.nextId++;
    const v = this.voice;
    return new Promise((resolve, reject) => {
      this.jobs.set(id, { resolve, reject });
      this.worker.postMessage({ id, sentences, cancel, scales: [v.noiseScale, v.lengthScale, v.noiseW], rate: v.sampleRate, silence: SENTENCE_SILENCE_S, peak: PEAK, maxGain: MAX_GAIN });
    });
  }
}

export interface PiperOptions {
  /** The voice's `.onnx` file (its `.onnx.json` beside it). */
  model: string;
  /** espeak-ng for the phonemes (default `espeak-ng` on PATH). */
  espeakExecutable?: string;
  /** Speaks when the voice cannot be loaded (default espeak-ng's en-us). */
  fallback?: SpeechSynthesizer;
  /** Where a fallback is reported (once). */
  log?: (line: string) => void;
}

/** The port's synthesizer on a Piper voice (see the top of this file). */
export class PiperSynthesizer implements SpeechSynthesizer {
  /** Ends every voice's thread (tests; a process ending needs nothing: the threads are unref'd). */
  static unloadAll(): Promise<void> {
    return PiperEngine.unloadAll();
  }

  private readonly engine: PiperEngine;
  private readonly phonemizer: EspeakPhonemizer;
  private readonly fallback: SpeechSynthesizer;
  private warned = false;
  /** The last synthesis's costs. */
  lastStats: PiperStats | null = null;

  constructor(private readonly opts: PiperOptions) {
    this.engine = PiperEngine.for(path.resolve(opts.model), MEDIA_RATE);
    this.phonemizer = new EspeakPhonemizer({ voice: this.engine.voice.espeakVoice, executable: opts.espeakExecutable });
    this.fallback = opts.fallback ?? new EspeakSynthesizer({ executable: opts.espeakExecutable });
  }

  /** Resolves once the voice is loaded (rejects when it cannot be: synthesis then falls back). */
  ready(): Promise<void> {
    return this.engine.ready;
  }

  /** The sentences' phonemes, as ids (for tests and tools). */
  async phonemeIds(text: string): Promise<number[][]> {
    const sentences = await this.phonemizer.phonemize(text);
    return sentences.map((s) => phonemeIds(s, this.engine.voice.phonemeIdMap));
  }

  async synthesize(text: string, signal?: AbortSignal): Promise<Int16Array> {
    if (signal?.aborted) throw abortReason(signal);
    if (this.engine.failed) return this.fallBack(text, signal, this.engine.failed);
    const ids = await this.phonemeIds(text);
    if (signal?.aborted) throw abortReason(signal);
    if (!ids.length) return new Int16Array(0);
    const cancel = new Int32Array(new SharedArrayBuffer(4));
    // Cancelling answers at once with the signal's reason; the thread drops the work before its next sentence.
    let onAbort = () => undefined as void;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => {
        Atomics.store(cancel, 0, 1);
        reject(abortReason(signal!));
      };
    });
    aborted.catch(() => undefined);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const work = this.engine.run(ids, cancel);
      const r = await (signal ? Promise.race([work, aborted]) : work);
      this.lastStats = { sentences: ids.length, modelMs: r.modelMs, totalMs: r.totalMs };
      return r.pcm;
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (this.engine.failed) return this.fallBack(text, signal, this.engine.failed);
      throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Ends this synthesizer's espeak-ng process (the voice's thread is shared: PiperSynthesizer.unloadAll). */
  close(): void {
    this.phonemizer.close();
  }

  private fallBack(text: string, signal: AbortSignal | undefined, why: Error): Promise<Int16Array> {
    if (!this.warned) {
      this.warned = true;
      (this.opts.log ?? console.warn)(`tts: the Piper voice is not available (${why.message}); speaking with espeak-ng instead`);
    }
    return this.fallback.synthesize(text, signal);
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/**
 * The Piper voice at `model` when its files are there, else espeak-ng with a log line
 * saying why (a missing model never stops the process or a call).
 */
export function piperOrEspeak(opts: PiperOptions & { espeakVoice?: string }): SpeechSynthesizer {
  const fallback = opts.fallback ?? new EspeakSynthesizer({ voice: opts.espeakVoice, executable: opts.espeakExecutable });
  const missing = [opts.model, `${opts.model}.json`].filter((f) => !fs.existsSync(f));
  const log = opts.log ?? console.warn;
  if (missing.length) {
    log(`tts: the Piper voice is missing (${missing.join(', ')}; npm run models:fetch provides ${DEFAULT_PIPER_VOICE}); speaking with espeak-ng instead`);
    return fallback;
  }
  try {
    return new PiperSynthesizer({ ...opts, fallback, log });
  } catch (err) {
    log(`tts: the Piper voice ${opts.model} cannot be used (${(err as Error).message}); speaking with espeak-ng instead`);
    return fallback;
  }
}
