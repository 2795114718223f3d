/**
 * The embedded speech-to-text: whisper.cpp (`@napi-rs/whisper`, prebuilt) with a GGML
 * model from `npm run models:fetch`, run in the worker process only.
 *
 * - Decoding: Debian's `ffmpeg` turns any container it knows (WebM/Opus, OGG, MP3, WAV,
 *   MP4, M4A, ...) into 16 kHz mono float32 on a pipe, which is what whisper.cpp takes.
 *   Decoding stops as soon as the recording passes `maxSeconds`: a long video is refused
 *   (MediaTooLong) without being decoded or transcribed whole.
 * - Silence: Whisper invents words for silence (" you", " Thank you."), so the loudness is
 *   measured first and a recording with no 30 ms window above SILENCE_DBFS is an empty
 *   transcript without running the model.
 * - `full()` is synchronous (it holds the calling thread for the whole transcription), so
 *   it runs in a worker_thread: the worker's event loop (activity heartbeats, other
 *   workflows) keeps running. The model is loaded once into that thread and kept while
 *   it is used; the thread ends after IDLE_UNLOAD_MS without work, giving back its memory
 *   (~380 MB for base).
 * - One transcription at a time per process (module-level queue): on 2 cores one uses
 *   both, and a second would only slow both down and double the memory.
 * - A deadline per transcription (twice the longest recording, at least a minute): past
 *   it, or when the caller aborts, the thread is terminated, which is the only way to stop
 *   a running `full()`; the next transcription starts a fresh thread.
 */
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import { ExtractionError, MediaTooLong, TranscriberError } from '../../lib/extract/types';
import { definedBy } from '../../lib/process/plain-source';
import { runCommand } from '../../lib/process/spawn-thread';
import { upsample, upsamplePlan, UPSAMPLE_SOURCE, type UpsamplePlan } from '../../lib/audio/audio';

export const SAMPLE_RATE = 16_000;
/** A recording whose loudest 30 ms window is quieter than this is silence (speech peaks well above -30 dBFS). */
export const SILENCE_DBFS = -45;
const WINDOW = (SAMPLE_RATE * 30) / 1000;
/** The model thread ends after this long without work. */
const IDLE_UNLOAD_MS = 5 * 60_000;

export interface LocalWhisperOptions {
  /** whisper.cpp GGML model file. */
  modelPath: string;
  /** Longest recording taken, in seconds (TRANSCRIBE_MAX_SECONDS). */
  maxSeconds: number;
  /** whisper.cpp threads (TRANSCRIBE_THREADS). */
  threads?: number;
  /** Whisper language code, or 'auto' (TRANSCRIBE_LANGUAGE). */
  language?: string;
  /** The ffmpeg executable (default: `ffmpeg` on PATH). */
  ffmpeg?: string;
}

/** What one transcription cost, for logs and the benchmark. */
export interface TranscriptionStats {
  audioSeconds: number;
  decodeMs: number;
  /** Time in whisper.cpp (0 for silence), model load included when it happened. */
  transcribeMs: number;
  /** Whether the model was loaded for this transcription. */
  loaded: boolean;
  silent: boolean;
}

/** The loudest 30 ms window of the samples in dBFS (-Infinity for digital silence), as plain JavaScript for the model threads (lib/process/plain-source.ts): defines `peakWindowDbfs(samples)`. */
export const PEAK_WINDOW_SOURCE = String.raw`
function peakWindowDbfs(samples) {
  const WINDOW = ${WINDOW};
  let peak = 0;
  for (let start = 0; start < samples.length; start += WINDOW) {
    const end = Math.min(samples.length, start + WINDOW);
    let sum = 0;
    for (let i = start; i < end; i++) sum += samples[i] * samples[i];
    peak = Math.max(peak, sum / Math.max(1, end - start));
  }
  return 10 * Math.log10(peak);
}
`;

/** Loudest 30 ms window of the samples, in dBFS (-Infinity for digital silence): PEAK_WINDOW_SOURCE's function. */
export const peakWindowDbfs = definedBy<(samples: Float32Array) => number>(PEAK_WINDOW_SOURCE, 'peakWindowDbfs');

/**
 * Decodes any media ffmpeg reads to 16 kHz mono float32; MediaTooLong past `maxSeconds`. ffmpeg is started from the
 * spawn thread (lib/process/spawn-thread.ts): this runs in the worker process, beside live calls, and a spawn from its
 * main thread holds it 30-60 ms, stalling the pacing of their audio.
 */
export async function decodeToPcm(filePath: string, maxSeconds: number, ffmpeg = 'ffmpeg', signal?: AbortSignal): Promise<Float32Array> {
  const maxBytes = Math.ceil(maxSeconds * SAMPLE_RATE) * 4;
  const r = await runCommand(ffmpeg, ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', filePath, '-vn', '-f', 'f32le', '-ac', '1', '-ar', String(SAMPLE_RATE), 'pipe:1'], {
    maxStdoutBytes: maxBytes,
    stderrTail: 4000,
    signal,
  });
  if (!r.started) {
    throw r.error.code === 'ENOENT'
      ? new TranscriberError('the embedded transcriber needs ffmpeg, which is not installed', r.error.message)
      : new TranscriberError('ffmpeg could not start', r.error.message, false, true);
  }
  if (r.overflow) throw new MediaTooLong(maxSeconds);
  if (signal?.aborted) throw new ExtractionError('transcription was cancelled');
  if (r.code !== 0) throw new ExtractionError('the recording could not be decoded', r.stderr.trim() || `ffmpeg exit ${r.code ?? r.signal}`);
  // Whole samples; the thread's buffer starts at offset 0, so no copy is needed unless it does not.
  const n = Math.floor(r.stdout.length / 4);
  if (r.stdout.byteOffset % 4 === 0) return new Float32Array(r.stdout.buffer, r.stdout.byteOffset, n);
  const samples = new Float32Array(n);
  Buffer.from(samples.buffer).set(r.stdout.subarray(0, n * 4));
  return samples;
}

/** The thread's code: loads the model once, then answers one job at a time. Plain JS, so it runs under tsx, Jest and a build alike. */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const w = require(workerData.modulePath);
let model;
try {
  model = new w.Whisper(workerData.modelPath, { useGpu: false });
  parentPort.postMessage({ ready: true });
} catch (err) {
  parentPort.postMessage({ ready: false, error: String(err && err.message || err) });
}
${UPSAMPLE_SOURCE}
${PEAK_WINDOW_SOURCE}
parentPort.on('message', (job) => {
  try {
    let samples = job.samples;
    // A call's turn at its own rate: upsampled and padded here, off the event loop that paces calls' audio.
    if (job.pcm) {
      samples = upsampleWithPlan(job.pcm, job.plan, job.pad, job.pad);
      if (!samples.length || peakWindowDbfs(samples) < ${SILENCE_DBFS}) return parentPort.postMessage({ id: job.id, silent: true });
    }
    const p = new w.WhisperFullParams(w.WhisperSamplingStrategy.Greedy);
    p.nThreads = job.threads;
    p.language = job.language;
    p.translate = false;
    p.noTimestamps = true;
    p.printProgress = false;
    p.printRealtime = false;
    p.printTimestamps = false;
    p.printSpecial = false;
    p.suppressBlank = true;
    p.suppressNonSpeechTokens = true;
    parentPort.postMessage({ id: job.id, text: model.full(p, samples) });
  } catch (err) {
    parentPort.postMessage({ id: job.id, error: String(err && err.message || err) });
  }
});
`;

interface ThreadReply {
  id?: number;
  ready?: boolean;
  text?: string;
  silent?: boolean;
  error?: string;
}

/** What the thread hears: 16 kHz float32, or a turn at a lower rate it upsamples and pads itself (then checks it for silence). */
type ThreadAudio = { samples: Float32Array } | { pcm: Int16Array<ArrayBuffer>; plan: UpsamplePlan; pad: number };

/** One model thread per model file in this process. */
class ModelThread {
  private worker: Worker | null = null;
  private ready: Promise<void> | null = null;
  private idle: NodeJS.Timeout | null = null;
  private nextId = 1;
  private pending = new Map<number, { resolve: (text: string | null) => void; reject: (err: Error) => void }>();

  constructor(private readonly modelPath: string) {}

  get loaded(): boolean {
    return this.worker !== null;
  }

  /** The model's text; null for a turn the thread found silent. A turn's `pcm` buffer is transferred (unusable here after). */
  async run(audio: ThreadAudio, threads: number, language: string, deadlineMs: number, signal?: AbortSignal): Promise<string | null> {
    if (this.idle) clearTimeout(this.idle);
    try {
      await this.start();
      const worker = this.worker!;
      // Referenced while it works (a script awaiting it stays alive), not while idle (it never holds a process open).
      worker.ref();
      const id = this.nextId++;
      return await new Promise<string | null>((resolve, reject) => {
        const timer = setTimeout(() => this.kill(new TranscriberError(`transcription exceeded ${Math.round(deadlineMs / 1000)} s`)), deadlineMs);
        const onAbort = () => this.kill(new ExtractionError('transcription was cancelled'));
        signal?.addEventListener('abort', onAbort, { once: true });
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        };
        this.pending.set(id, {
          resolve: (text) => (done(), resolve(text)),
          reject: (err) => (done(), reject(err)),
        });
        worker.postMessage({ id, ...audio, threads, language }, 'pcm' in audio ? [audio.pcm.buffer] : []);
      });
    } finally {
      this.worker?.unref();
      this.idle = setTimeout(() => this.kill(new TranscriberError('the model was unloaded')), IDLE_UNLOAD_MS);
      this.idle.unref();
    }
  }

  private start(): Promise<void> {
    if (this.ready) return this.ready;
    if (!fs.existsSync(this.modelPath)) {
      return Promise.reject(new TranscriberError(`the speech-to-text model is missing (${this.modelPath}): run npm run models:fetch`));
    }
    const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { modelPath: this.modelPath, modulePath: require.resolve('@napi-rs/whisper') } });
    this.worker = worker;
    this.ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (msg: ThreadReply) => {
        if (msg.ready !== undefined) {
          if (msg.ready) return resolve();
          this.kill(new TranscriberError('the speech-to-text model could not be loaded', msg.error));
          return reject(new TranscriberError('the speech-to-text model could not be loaded', msg.error));
        }
        const job = msg.id !== undefined ? this.pending.get(msg.id) : undefined;
        if (!job) return;
        this.pending.delete(msg.id!);
        if (msg.error !== undefined) job.reject(new TranscriberError('transcription failed', msg.error));
        else job.resolve(msg.silent ? null : (msg.text ?? ''));
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

  /** Ends the thread (the only way to stop a running full()); what was waiting fails with `err`. */
  kill(err: Error): void {
    const worker = this.worker;
    this.worker = null;
    this.ready = null;
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    for (const job of this.pending.values()) job.reject(err);
    this.pending.clear();
    if (worker) void worker.terminate();
  }
}

/** `samples` with `pad` zeros on each side. */
export function padded(samples: Float32Array, pad: number): Float32Array {
  const out = new Float32Array(samples.length + 2 * pad);
  out.set(samples, pad);
  return out;
}

const threads = new Map<string, ModelThread>();
/** One transcription at a time in this process, whichever transcriber instance asks. */
let queue: Promise<unknown> = Promise.resolve();

function serialized<T>(fn: () => Promise<T>): Promise<T> {
  const run = queue.then(fn, fn);
  queue = run.catch(() => undefined);
  return run;
}

/** Whisper's text, tidied: segments joined, whisper.cpp's non-speech tags ([BLANK_AUDIO], [MUSIC]) dropped. */
export function tidyTranscript(text: string): string {
  return text
    .replace(/\[[A-Z_ ]+\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * Speech-to-text in this process with whisper.cpp (see the module comment). The model
 * loads on the first transcription, never at construction: a process that is handed
 * one but never transcribes (the API) loads nothing.
 */
export class LocalWhisperTranscriber {
  /** It applies its own time limit (from the recording's length), not the extraction's. */
  readonly enforcesOwnTimeLimit = true;
  private readonly threads: number;
  private readonly language: string;

  constructor(private readonly opts: LocalWhisperOptions) {
    this.threads = opts.threads ?? 2;
    this.language = opts.language ?? 'auto';
  }

  get modelPath(): string {
    return this.opts.modelPath;
  }

  async transcribe(filePath: string, _mime: string, options: { signal?: AbortSignal; maxSeconds?: number } = {}): Promise<string> {
    return (await this.transcribeWithStats(filePath, options)).text;
  }

  /** The transcript with what it cost (the benchmark reads these). `maxSeconds` may only lower the cap (anonymous work). */
  transcribeWithStats(filePath: string, options: { signal?: AbortSignal; maxSeconds?: number } = {}): Promise<{ text: string; stats: TranscriptionStats }> {
    return serialized(async () => {
      const { signal } = options;
      if (signal?.aborted) throw new ExtractionError('transcription was cancelled');
      const t0 = performance.now();
      const maxSeconds = Math.min(this.opts.maxSeconds, options.maxSeconds ?? Infinity);
      const samples = await decodeToPcm(filePath, maxSeconds, this.opts.ffmpeg, signal);
      return this.recognize({ samples }, performance.now() - t0, signal);
    });
  }

  /**
   * Audio already in memory as 16 kHz mono float32 (a voice call's turn): no file and no
   * ffmpeg, the same queue, thread, silence check and deadline as a file. Longer than
   * `maxSeconds`: MediaTooLong. `whileQueued`: aborted before the queue reaches this
   * transcription, it is dropped (cancelled); once running it goes on (only `signal`
   * stops running work, by ending the model's thread).
   */
  transcribeSamples(samples: Float32Array, options: { signal?: AbortSignal; whileQueued?: AbortSignal; language?: string } = {}): Promise<{ text: string; stats: TranscriptionStats }> {
    return serialized(async () => {
      if (options.signal?.aborted || options.whileQueued?.aborted) throw new ExtractionError('transcription was cancelled');
      if (samples.length > this.opts.maxSeconds * SAMPLE_RATE) throw new MediaTooLong(this.opts.maxSeconds);
      return this.recognize({ samples }, 0, options.signal, options.language);
    });
  }

  /**
   * A call's turn as 16-bit PCM at `rate` (a divisor of 16 kHz: the call's 8 kHz), with `padMs` of silence put on
   * each side: as transcribeSamples of upsample(pcm) so padded, but the upsampling, padding and silence check run in
   * the model's thread, off the event loop that paces calls' audio. `pcm`'s buffer is transferred to the thread: pass
   * a copy if you keep it. Without the model file, the same work on this thread (silence is still '' then).
   */
  transcribePcm(
    pcm: Int16Array<ArrayBuffer>,
    rate: number,
    options: { padMs?: number; signal?: AbortSignal; whileQueued?: AbortSignal; language?: string } = {},
  ): Promise<{ text: string; stats: TranscriptionStats }> {
    const factor = SAMPLE_RATE / rate;
    if (!Number.isInteger(factor) || factor < 1) throw new RangeError(`${rate} Hz does not divide ${SAMPLE_RATE} Hz`);
    const pad = Math.round((SAMPLE_RATE * (options.padMs ?? 0)) / 1000);
    return serialized(async () => {
      if (options.signal?.aborted || options.whileQueued?.aborted) throw new ExtractionError('transcription was cancelled');
      const length = pcm.length * factor + 2 * pad;
      if (length > this.opts.maxSeconds * SAMPLE_RATE) throw new MediaTooLong(this.opts.maxSeconds);
      const audio: ThreadAudio = fs.existsSync(this.opts.modelPath) ? { pcm, plan: upsamplePlan(factor), pad } : { samples: padded(upsample(pcm, factor), pad) };
      return this.recognize(audio, 0, options.signal, options.language);
    });
  }

  /**
   * Runs the model (inside the queue): silence is an empty transcript without the model (a turn's `pcm` is checked in
   * its thread, the model loaded).
   */
  private async recognize(job: ThreadAudio, decodeMs: number, signal?: AbortSignal, language?: string): Promise<{ text: string; stats: TranscriptionStats }> {
    const audioSeconds = ('samples' in job ? job.samples.length : job.pcm.length * job.plan.factor + 2 * job.pad) / SAMPLE_RATE;
    const stats: TranscriptionStats = { audioSeconds, decodeMs, transcribeMs: 0, loaded: false, silent: false };
    if ('samples' in job && (!job.samples.length || peakWindowDbfs(job.samples) < SILENCE_DBFS)) return { text: '', stats: { ...stats, silent: true } };
    let thread = threads.get(this.opts.modelPath);
    if (!thread) threads.set(this.opts.modelPath, (thread = new ModelThread(this.opts.modelPath)));
    stats.loaded = !thread.loaded;
    const t1 = performance.now();
    // Twice real time is far slower than whisper base runs here (0.3-0.5), model load included.
    const deadlineMs = Math.max(60_000, audioSeconds * 2000);
    const text = await thread.run(job, this.threads, language ?? this.language, deadlineMs, signal);
    stats.transcribeMs = performance.now() - t1;
    if (text === null) return { text: '', stats: { ...stats, silent: true } };
    return { text: tidyTranscript(text), stats };
  }

  /** Ends this model's thread now (tests, benchmarks, shutdown). */
  static unloadAll(): void {
    for (const t of threads.values()) t.kill(new TranscriberError('the model was unloaded'));
    threads.clear();
  }
}
