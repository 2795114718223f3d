/**
 * The voice agent's embedded speech-to-text: Moonshine base (English only) on
 * onnxruntime-node, with the model `npm run models:fetch` converts from PyPI
 * `moonshine-cpp` into `<models dir>/moonshine/base-en/` (bin/fetch-models.ts).
 *
 * Why not Whisper for calls: Whisper always encodes a 30 s window, so a 3 s turn costs
 * whisper base about 6.4 s of CPU here (tiny.en 2.8 s); Moonshine's encoder takes the
 * audio as long as it is, and a turn costs 0.1-0.6 s of CPU, with fewer word errors
 * than tiny.en. Files and voice notes stay on Whisper (multilingual; whisper.ts).
 *
 * - The model: an encoder (16 kHz float32 samples `input_values [1,N]` →
 *   `last_hidden_state [1,T,416]`) and a merged decoder run greedily with its key/value
 *   cache: token 1 in, the most likely token out, until token 2 or at most
 *   MAX_TOKENS_PER_SECOND per second of audio (a few more for a short turn). The cache is
 *   32 tensors (8 layers × decoder/encoder × key/value), empty at the first step; the
 *   encoder's part is computed at that step and then kept. `tokenizer.bin` is the
 *   vocabulary: (varint length, bytes) per token id, `▁` for a space.
 * - A worker_thread holds both sessions: onnxruntime-node's session creation (~3 s of
 *   CPU) and its runs are synchronous on the calling thread, and the worker's event loop
 *   paces live call audio. One intra-op and one inter-op thread: a turn is small work, and
 *   the other core stays for the calls' audio and the other sessions.
 * - Loaded on the first turn, then kept for the process's life (reloading would put ~3 s
 *   on some caller's turn); `MoonshineTranscriber.unloadAll()` ends the thread.
 * - One transcription at a time per process (its own queue: a voice turn never waits
 *   behind a file Whisper is transcribing). `whileQueued` aborted before its turn in the
 *   queue drops the work; `signal` stops running work between two decoder steps (no
 *   reload needed); past its deadline (twice the audio, at least a minute, as whisper's)
 *   the thread is ended, the only way to stop a stuck run.
 * - Silence (no 30 ms window above SILENCE_DBFS, whisper's check) is '' without the model;
 *   otherwise the quiet before and after the speech is cut first (trimSilence: Moonshine
 *   answers nothing for audio that is mostly quiet).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { definedBy } from '../../lib/process/plain-source';
import { ExtractionError, MediaTooLong, TranscriberError } from '../../lib/extract/types';
import { upsample, upsamplePlan, UPSAMPLE_SOURCE, type UpsamplePlan } from '../../lib/audio/audio';
import { padded, PEAK_WINDOW_SOURCE, peakWindowDbfs, SAMPLE_RATE, SILENCE_DBFS } from './whisper';

/** Greedy decoding's cap: English speech runs at 3-4 tokens a second; a decoder that repeats itself stops here. */
export const MAX_TOKENS_PER_SECOND = 6.5;
/** Tokens allowed on top of the cap, so a one-word turn is never cut. */
const EXTRA_TOKENS = 6;

/** The files `npm run models:fetch` writes into `<models dir>/moonshine/base-en/`. */
export const MOONSHINE_FILES = ['encoder_model.onnx', 'decoder_model_merged.onnx', 'tokenizer.bin'] as const;

/** Whether the directory holds Moonshine's three files (presence only: models:fetch checks their sha256). */
export function moonshineFilesPresent(dir: string): boolean {
  return MOONSHINE_FILES.every((f) => fs.existsSync(path.join(dir, f)));
}

export interface MoonshineOptions {
  /** `<models dir>/moonshine/base-en`. */
  modelDir: string;
  /** Longest turn taken, in seconds (TRANSCRIBE_MAX_SECONDS, as whisper). */
  maxSeconds: number;
}

/** What one transcription cost (the benchmark reads these). */
export interface MoonshineStats {
  audioSeconds: number;
  /** Time in the model (0 for silence), its load included when it happened. */
  transcribeMs: number;
  loaded: boolean;
  silent: boolean;
  /** Tokens the decoder produced. */
  tokens: number;
}

/**
 * The thread's code: plain JS, so it runs under tsx, Jest and a build alike (a function: it includes
 * TRIM_SILENCE_SOURCE, defined below beside trimSilence).
 */
const THREAD_SOURCE = () => `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const ort = require(workerData.ortPath);
const LAYERS = 8, HEADS = 8, HEAD_DIM = 52, START = 1, END = 2;
let encoder, decoder, vocab;
const options = { graphOptimizationLevel: 'all', intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' };

function readVocab(buf) {
  const tokens = [];
  for (let p = 0; p < buf.length; ) {
    let len = 0, shift = 0, b;
    do { b = buf[p++]; len |= (b & 0x7f) << shift; shift += 7; } while (b & 0x80);
    tokens.push(buf.subarray(p, p + len));
    p += len;
  }
  return tokens;
}

const loading = (async () => {
  try {
    encoder = await ort.InferenceSession.create(path.join(workerData.dir, 'encoder_model.onnx'), options);
    decoder = await ort.InferenceSession.create(path.join(workerData.dir, 'decoder_model_merged.onnx'), options);
    vocab = readVocab(fs.readFileSync(path.join(workerData.dir, 'tokenizer.bin')));
    parentPort.postMessage({ ready: true });
  } catch (err) {
    parentPort.postMessage({ ready: false, error: String((err && err.message) || err) });
  }
})();

async function transcribe(job) {
  const cancelled = () => Atomics.load(job.cancel, 0) === 1;
  const { last_hidden_state: hidden } = await encoder.run({ input_values: new ort.Tensor('float32', job.samples, [1, job.samples.length]) });
  let cache = {};
  for (let i = 0; i < LAYERS; i++)
    for (const part of ['decoder', 'encoder'])
      for (const kv of ['key', 'value']) cache['past_key_values.' + i + '.' + part + '.' + kv] = new ort.Tensor('float32', new Float32Array(0), [1, HEADS, 0, HEAD_DIM]);
  const out = [];
  let token = START;
  for (let step = 0; step < job.maxTokens; step++) {
    if (cancelled()) return { cancelled: true };
    const r = await decoder.run({
      input_ids: new ort.Tensor('int64', BigInt64Array.of(BigInt(token)), [1, 1]),
      encoder_hidden_states: hidden,
      use_cache_branch: new ort.Tensor('bool', [step > 0], [1]),
      ...cache,
    });
    const logits = r.logits.data;
    const size = r.logits.dims[2];
    let best = 0;
    for (let j = 1; j < size; j++) if (logits[j] > logits[best]) best = j;
    const next = {};
    for (const name of Object.keys(cache)) {
      // The encoder's keys and values come out of the first step only; the cache branch passes them through.
      next[name] = step > 0 && name.includes('.encoder.') ? cache[name] : r[name.replace('past_key_values', 'present')];
    }
    cache = next;
    if (best === END) break;
    out.push(best);
    token = best;
  }
  const bytes = Buffer.concat(out.filter((t) => t > END).map((t) => vocab[t] || Buffer.alloc(0)));
  return { text: bytes.toString('utf8').replace(/\\u2581/g, ' '), tokens: out.length };
}

${UPSAMPLE_SOURCE}
${PEAK_WINDOW_SOURCE}
${TRIM_SILENCE_SOURCE}

let chain = loading;
parentPort.on('message', (job) => {
  chain = chain.then(async () => {
    try {
      // A call's turn at its own rate: upsampled, padded, checked for silence and trimmed here, off the event loop
      // that paces calls' audio (MoonshineTranscriber.transcribeSamples does the same on 16 kHz samples).
      if (job.pcm) {
        const x = upsampleWithPlan(job.pcm, job.plan, job.pad, job.pad);
        if (!x.length || peakWindowDbfs(x) < ${SILENCE_DBFS}) return parentPort.postMessage({ id: job.id, silent: true });
        job.samples = trimSilence(x).slice();
        job.maxTokens = maxTokensFor(job.samples.length / ${SAMPLE_RATE});
      }
      parentPort.postMessage({ id: job.id, ...(await transcribe(job)) });
    } catch (err) {
      parentPort.postMessage({ id: job.id, error: String((err && err.message) || err) });
    }
  });
});
`;

interface ThreadReply {
  id?: number;
  ready?: boolean;
  text?: string;
  tokens?: number;
  silent?: boolean;
  cancelled?: boolean;
  error?: string;
}

/** What the thread hears: trimmed 16 kHz float32 speech, or a turn at a lower rate it upsamples, pads, checks and trims itself. */
type ThreadAudio = { samples: Float32Array; maxTokens: number } | { pcm: Int16Array<ArrayBuffer>; plan: UpsamplePlan; pad: number };

/** The model's answer; `silent` when the thread found a turn silent (the model not run). */
interface ThreadResult {
  text: string;
  tokens: number;
  silent?: boolean;
}

interface Pending {
  resolve: (r: ThreadResult) => void;
  reject: (err: Error) => void;
}

/** The model thread of one model directory in this process. */
class ModelThread {
  private worker: Worker | null = null;
  private ready: Promise<void> | null = null;
  private nextId = 1;
  private pending = new Map<number, Pending>();

  constructor(private readonly dir: string) {}

  get loaded(): boolean {
    return this.worker !== null;
  }

  /** A turn's `pcm` buffer is transferred to the thread (unusable here after). */
  async run(audio: ThreadAudio, deadlineMs: number, signal?: AbortSignal): Promise<ThreadResult> {
    try {
      await this.start();
      const worker = this.worker!;
      // Referenced while it works (a script awaiting it stays alive), not while idle (it never holds a process open).
      worker.ref();
      const id = this.nextId++;
      const cancel = new Int32Array(new SharedArrayBuffer(4));
      return await new Promise<ThreadResult>((resolve, reject) => {
        const timer = setTimeout(() => this.kill(new TranscriberError(`transcription exceeded ${Math.round(deadlineMs / 1000)} s`)), deadlineMs);
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.pending.delete(id);
        };
        // The thread stops at its next decoder step and drops the result; the caller hears now.
        const onAbort = () => {
          Atomics.store(cancel, 0, 1);
          done();
          reject(new ExtractionError('transcription was cancelled'));
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.pending.set(id, {
          resolve: (r) => (done(), resolve(r)),
          reject: (err) => (done(), reject(err)),
        });
        worker.postMessage({ id, ...audio, cancel }, 'pcm' in audio ? [audio.pcm.buffer] : []);
      });
    } finally {
      this.worker?.unref();
    }
  }

  private start(): Promise<void> {
    if (this.ready) return this.ready;
    const missing = MOONSHINE_FILES.filter((f) => !fs.existsSync(path.join(this.dir, f)));
    if (missing.length) {
      return Promise.reject(new TranscriberError(`the Moonshine speech-to-text model is missing (${missing.join(', ')} in ${this.dir}): run npm run models:fetch`));
    }
    const worker = new Worker(THREAD_SOURCE(), { eval: true, workerData: { dir: this.dir, ortPath: require.resolve('onnxruntime-node') } });
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: ThreadReply) => {
        if (msg.ready !== undefined) {
          if (msg.ready) return resolve();
          const failure = new TranscriberError('the Moonshine speech-to-text model could not be loaded', msg.error);
          this.kill(failure);
          return reject(failure);
        }
        const job = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
        if (!job) return; // cancelled: its caller has already been answered
        if (msg.error !== undefined) job.reject(new TranscriberError('transcription failed', msg.error));
        else if (msg.cancelled) job.reject(new ExtractionError('transcription was cancelled'));
        else job.resolve({ text: msg.text ?? '', tokens: msg.tokens ?? 0, silent: msg.silent });
      });
      worker.on('error', (err) => {
        const failure = new TranscriberError('the transcription thread failed', err.message, false, true);
        reject(failure);
        this.kill(failure);
      });
      worker.on('exit', () => {
        if (this.worker === worker) this.kill(new TranscriberError('the transcription thread stopped', undefined, false, true));
      });
    });
    return this.ready;
  }

  /** Ends the thread; what was waiting fails with `err`. */
  kill(err: Error): void {
    const worker = this.worker;
    this.worker = null;
    this.ready = null;
    const jobs = [...this.pending.values()];
    this.pending.clear();
    for (const job of jobs) job.reject(err);
    if (worker) void worker.terminate();
  }
}

const threads = new Map<string, ModelThread>();
/** One Moonshine transcription at a time in this process, whichever instance asks. */
let queue: Promise<unknown> = Promise.resolve();

function serialized<T>(fn: () => Promise<T>): Promise<T> {
  const run = queue.then(fn, fn);
  queue = run.catch(() => undefined);
  return run;
}

/** Quiet kept before the first and after the last loud window (300 ms gave "What time will you open" for "What time do you open", 600 ms the words). */
const KEEP_MS = 600;
const WINDOW = (SAMPLE_RATE * 30) / 1000;

/** trimSilence (below) as plain JavaScript for the model thread (lib/process/plain-source.ts): defines `trimSilence(samples)` and `maxTokensFor(audioSeconds)`. */
export const TRIM_SILENCE_SOURCE = String.raw`
function trimSilence(samples) {
  const WINDOW = ${WINDOW};
  const threshold = 10 ** (${SILENCE_DBFS} / 10) * WINDOW;
  const loud = (start) => {
    let sum = 0;
    for (let i = start, end = Math.min(samples.length, start + WINDOW); i < end; i++) sum += samples[i] * samples[i];
    return sum > threshold;
  };
  let first = -1;
  for (let w = 0; w < samples.length; w += WINDOW) if (loud(w)) { first = w; break; }
  if (first < 0) return samples.subarray(0, 0);
  let last = first;
  for (let w = Math.floor((samples.length - 1) / WINDOW) * WINDOW; w > first; w -= WINDOW) if (loud(w)) { last = w; break; }
  const keep = (${SAMPLE_RATE} * ${KEEP_MS}) / 1000;
  return samples.subarray(Math.max(0, first - keep), Math.min(samples.length, last + WINDOW + keep));
}

function maxTokensFor(audioSeconds) {
  return Math.ceil(audioSeconds * ${MAX_TOKENS_PER_SECOND}) + ${EXTRA_TOKENS};
}
`;

/**
 * The samples from KEEP_MS before the first to KEEP_MS after the last 30 ms window louder
 * than SILENCE_DBFS. Moonshine learned on utterances: audio that is mostly quiet (a turn
 * with seconds of silence after it, a call's recording) comes back empty (measured here:
 * a 2.5 s sentence followed by 15 s of silence gave '', the same with 3 s of silence the
 * whole sentence). The quiet around the speech is cut; the pauses inside it are kept.
 */
export const trimSilence = definedBy<(samples: Float32Array) => Float32Array>(TRIM_SILENCE_SOURCE, 'trimSilence');

/** Greedy decoding's token cap for this much speech (TRIM_SILENCE_SOURCE's, which the thread uses too). */
const maxTokensFor = definedBy<(audioSeconds: number) => number>(TRIM_SILENCE_SOURCE, 'maxTokensFor');

/** Moonshine's text, tidied: spaces collapsed, no space before punctuation. */
function tidy(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/ ([,.?!])/g, '$1').trim();
}

/**
 * Speech-to-text of audio in memory (16 kHz mono float32) with Moonshine base, English
 * only (see the module comment). Nothing loads at construction: the API process, which is
 * handed one but never transcribes a call, loads nothing.
 */
export class MoonshineTranscriber {
  constructor(private readonly opts: MoonshineOptions) {}

  /** The model directory (what the voice wiring reports as the model's path). */
  get modelPath(): string {
    return this.opts.modelDir;
  }

  /**
   * The transcript and what it cost. Longer than `maxSeconds`: MediaTooLong. `whileQueued`
   * aborted before the queue reaches this transcription: dropped (cancelled); `signal`
   * also stops it while it runs.
   */
  transcribeSamples(samples: Float32Array, options: { signal?: AbortSignal; whileQueued?: AbortSignal } = {}): Promise<{ text: string; stats: MoonshineStats }> {
    return serialized(async () => {
      const { signal } = options;
      if (signal?.aborted || options.whileQueued?.aborted) throw new ExtractionError('transcription was cancelled');
      if (samples.length > this.opts.maxSeconds * SAMPLE_RATE) throw new MediaTooLong(this.opts.maxSeconds);
      const stats: MoonshineStats = { audioSeconds: samples.length / SAMPLE_RATE, transcribeMs: 0, loaded: false, silent: false, tokens: 0 };
      if (!samples.length || peakWindowDbfs(samples) < SILENCE_DBFS) return { text: '', stats: { ...stats, silent: true } };
      const speech = trimSilence(samples);
      const audioSeconds = speech.length / SAMPLE_RATE;
      return this.recognize({ samples: speech.slice(), maxTokens: maxTokensFor(audioSeconds) }, audioSeconds, stats, signal);
    });
  }

  /**
   * A call's turn as 16-bit PCM at `rate` (a divisor of 16 kHz: the call's 8 kHz), with `padMs` of silence put on
   * each side: as transcribeSamples of upsample(pcm) so padded, but the upsampling, padding, silence check and trim
   * run in the model's thread, off the event loop that paces calls' audio. `pcm`'s buffer is transferred to the
   * thread: pass a copy if you keep it. Without the model's files, the same work on this thread (silence is still ''
   * then, without the model).
   */
  transcribePcm(pcm: Int16Array<ArrayBuffer>, rate: number, options: { padMs?: number; signal?: AbortSignal; whileQueued?: AbortSignal } = {}): Promise<{ text: string; stats: MoonshineStats }> {
    const factor = SAMPLE_RATE / rate;
    if (!Number.isInteger(factor) || factor < 1) throw new RangeError(`${rate} Hz does not divide ${SAMPLE_RATE} Hz`);
    const pad = Math.round((SAMPLE_RATE * (options.padMs ?? 0)) / 1000);
    if (!moonshineFilesPresent(this.opts.modelDir)) return this.transcribeSamples(padded(upsample(pcm, factor), pad), options);
    return serialized(async () => {
      const { signal } = options;
      if (signal?.aborted || options.whileQueued?.aborted) throw new ExtractionError('transcription was cancelled');
      const length = pcm.length * factor + 2 * pad;
      if (length > this.opts.maxSeconds * SAMPLE_RATE) throw new MediaTooLong(this.opts.maxSeconds);
      const stats: MoonshineStats = { audioSeconds: length / SAMPLE_RATE, transcribeMs: 0, loaded: false, silent: false, tokens: 0 };
      // The deadline from the untrimmed turn (the thread trims): at least as long as transcribeSamples gives.
      const r = await this.recognize({ pcm, plan: upsamplePlan(factor), pad }, length / SAMPLE_RATE, stats, signal);
      return r.silent ? { text: '', stats: { ...r.stats, silent: true } } : r;
    });
  }

  /** Runs the model in its thread (inside the queue). */
  private async recognize(audio: ThreadAudio, audioSeconds: number, stats: MoonshineStats, signal?: AbortSignal): Promise<{ text: string; stats: MoonshineStats; silent?: boolean }> {
    let thread = threads.get(this.opts.modelDir);
    if (!thread) threads.set(this.opts.modelDir, (thread = new ModelThread(this.opts.modelDir)));
    stats.loaded = !thread.loaded;
    const t0 = performance.now();
    // Twice real time, at least a minute (whisper's limit): Moonshine runs at ~0.07 of real time here, load included.
    const deadlineMs = Math.max(60_000, audioSeconds * 2000);
    const { text, tokens, silent } = await thread.run(audio, deadlineMs, signal);
    stats.transcribeMs = performance.now() - t0;
    stats.tokens = tokens;
    return { text: tidy(text), stats, silent };
  }

  /** Ends every Moonshine thread of this process now (tests, benchmarks, shutdown). */
  static unloadAll(): void {
    for (const t of threads.values()) t.kill(new TranscriberError('the model was unloaded'));
    threads.clear();
  }
}
