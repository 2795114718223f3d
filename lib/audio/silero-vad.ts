/**
 * Silero VAD v5 (MIT; `silero_vad.onnx` of PyPI `silero-vad`, put under
 * `<models dir>/silero-vad/` by `npm run models:fetch`) on onnxruntime-node: a small
 * recurrent network giving, per window of audio, the probability that it is speech.
 * Unlike the energy VAD it is not fooled by loud noise, music or a line's hiss, and it
 * hears quiet word ends, so its hang-over can be short.
 *
 * - The model runs natively at 8 kHz (MEDIA_RATE): windows of 256 new samples (32 ms)
 *   with the 32 samples before them as context (input `[1, 288]`), `sr` = 8000, and a
 *   recurrent state `[2, 1, 128]` carried from window to window. 20 ms frames are re-cut
 *   into these windows.
 * - One InferenceSession per process (SileroModel.load), in a worker_thread, shared by
 *   every call, each call keeping its own state; 1 intra-op and 1 inter-op thread. A
 *   window costs well under a millisecond of CPU (docs/voice.md).
 * - Decisions as the energy Vad's (VadEvent, the same getters): a window is speech at
 *   `threshold` (0.5), stays speech down to `threshold - 0.15` (hysteresis);
 *   speech_start after `startMs` of speech windows in a row, speech_end after `silenceMs`
 *   without one.
 */
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { VadEvent } from './vad';

/** Samples per window at 8 kHz, and the context carried before each. */
const WINDOW = 256;
const CONTEXT = 32;
export const SILERO_RATE = 8000;
export const SILERO_WINDOW_MS = (WINDOW * 1000) / SILERO_RATE;

/**
 * The thread's code: plain JS, so it runs under tsx, Jest and a build alike (and in a realm of its own: onnxruntime's
 * output tensors are refused by a Jest test's realm). onnxruntime-node runs a session on the calling thread, so the
 * calls' event loop never waits for it here.
 */
const THREAD_SOURCE = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const ort = require(workerData.ortPath);
const sr = new ort.Tensor('int64', BigInt64Array.from([BigInt(workerData.rate)]), []);
const ready = ort.InferenceSession.create(workerData.file, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all' });
ready.then(() => parentPort.postMessage({ id: 0 }), (err) => parentPort.postMessage({ id: 0, error: String((err && err.message) || err) }));
let chain = ready;
parentPort.on('message', (m) => {
  chain = chain.then(async (session) => {
    try {
      const out = await session.run({ input: new ort.Tensor('float32', m.input, [1, m.input.length]), state: new ort.Tensor('float32', m.state, [2, 1, 128]), sr });
      parentPort.postMessage({ id: m.id, p: out.output.data[0], state: out.stateN.data });
    } catch (err) {
      parentPort.postMessage({ id: m.id, error: String((err && err.message) || err) });
    }
    return session;
  });
});
`;

/** The loaded model, shared by every SileroVad of the process (one thread holds the session). */
export class SileroModel {
  private static loading = new Map<string, Promise<SileroModel>>();
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: { p: number; state: Float32Array }) => void; reject: (e: Error) => void }>();

  private constructor(
    private readonly worker: Worker,
    readonly path: string,
  ) {}

  /** The process's one session for `file` (loaded on first use, ~50 ms). Rejects when the file is missing or unloadable. */
  static load(file: string): Promise<SileroModel> {
    let p = SileroModel.loading.get(file);
    if (!p) {
      p = new Promise<SileroModel>((resolve, reject) => {
        if (!fs.existsSync(file)) return reject(new Error(`Silero VAD model not found at ${file} (npm run models:fetch)`));
        const worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { file, rate: SILERO_RATE, ortPath: require.resolve('onnxruntime-node') } });
        const model = new SileroModel(worker, file);
        worker.on('message', (m: { id: number; error?: string; p: number; state: Float32Array }) => {
          if (m.id === 0) return m.error ? (void worker.terminate(), reject(new Error(`Silero VAD could not be loaded: ${m.error}`))) : resolve(model);
          const waiting = model.pending.get(m.id);
          model.pending.delete(m.id);
          if (m.error) waiting?.reject(new Error(m.error));
          else waiting?.resolve(m);
        });
        worker.on('error', (err) => {
          reject(err);
          for (const w of model.pending.values()) w.reject(err);
          model.pending.clear();
          SileroModel.loading.delete(file);
        });
        // After the listeners (adding one references the thread again): it never keeps the process alive.
        worker.unref();
      });
      p.catch(() => SileroModel.loading.delete(file));
      SileroModel.loading.set(file, p);
    }
    return p;
  }

  /** One window (CONTEXT + WINDOW samples, float -1..1) through the network: its speech probability; `state` updated in place. */
  async probability(input: Float32Array, state: Float32Array): Promise<number> {
    const id = this.nextId++;
    const r = await new Promise<{ p: number; state: Float32Array }>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, input, state });
    });
    state.set(r.state);
    return r.p;
  }

  /** Ends every Silero thread (tests, shutdown). */
  static async unloadAll(): Promise<void> {
    const all = await Promise.all([...SileroModel.loading.values()].map((p) => p.catch(() => null)));
    SileroModel.loading.clear();
    await Promise.all(all.map((m) => m?.worker.terminate()));
  }
}

export interface SileroVadOptions {
  /** Speech probability from which a window is speech (default 0.5). */
  threshold?: number;
  /** Speech windows needed in a row for speech_start (default 64 ms: two windows). */
  startMs?: number;
  /** Silence after speech before speech_end (default 250 ms). */
  silenceMs?: number;
}

/** Voice activity of one call's audio (MEDIA_RATE, any frame size) with the shared model. push() resolves in order. */
export class SileroVad {
  readonly sampleRate = SILERO_RATE;
  private readonly threshold: number;
  private readonly startWindows: number;
  private readonly silenceWindows: number;
  private readonly state = new Float32Array(2 * 128);
  /** Context (last CONTEXT samples) + the window being filled. */
  private readonly input = new Float32Array(CONTEXT + WINDOW);
  private filled = 0;
  private position = 0;
  private speaking = false;
  private voicedRun = 0;
  private runStart = 0;
  private silentRun = 0;
  private speechStart = 0;
  private lastVoicedEnd = 0;
  private voicedSamples = 0;
  private queue: Promise<unknown> = Promise.resolve();
  /** The last window's speech probability. */
  lastProbability = 0;

  constructor(
    private readonly model: SileroModel,
    opts: SileroVadOptions = {},
  ) {
    this.threshold = opts.threshold ?? 0.5;
    this.startWindows = Math.max(1, Math.round((opts.startMs ?? 64) / SILERO_WINDOW_MS));
    this.silenceWindows = Math.max(1, Math.round((opts.silenceMs ?? 250) / SILERO_WINDOW_MS));
  }

  get inSpeech(): boolean {
    return this.speaking;
  }

  get trailingSilenceMs(): number {
    return this.speaking ? ((this.position - this.lastVoicedEnd) * 1000) / SILERO_RATE : 0;
  }

  get lastVoicedSample(): number {
    return this.lastVoicedEnd;
  }

  get samplesSeen(): number {
    return this.position;
  }

  /** Speech heard in the current turn (voiced windows only), ms; 0 outside a turn. */
  get voicedMs(): number {
    return this.speaking ? (this.voicedSamples * 1000) / SILERO_RATE : 0;
  }

  /** Feeds audio; the events it caused. Calls are processed one after the other, in order. */
  push(samples: Int16Array): Promise<VadEvent[]> {
    const copy = Int16Array.from(samples);
    const run = this.queue.then(() => this.process(copy));
    this.queue = run.catch(() => undefined);
    return run;
  }

  finish(): VadEvent[] {
    if (!this.speaking) return [];
    this.speaking = false;
    return [this.endEvent()];
  }

  private async process(samples: Int16Array): Promise<VadEvent[]> {
    const events: VadEvent[] = [];
    for (let i = 0; i < samples.length; i++) {
      this.input[CONTEXT + this.filled++] = samples[i] / 32768;
      if (this.filled < WINDOW) continue;
      this.filled = 0;
      const p = await this.model.probability(this.input, this.state);
      this.input.copyWithin(0, WINDOW, WINDOW + CONTEXT);
      this.window(p, events);
    }
    return events;
  }

  private window(p: number, events: VadEvent[]): void {
    this.lastProbability = p;
    const start = this.position;
    this.position += WINDOW;
    const voiced = p >= (this.speaking ? this.threshold - 0.15 : this.threshold);
    if (this.speaking) {
      if (voiced) {
        this.silentRun = 0;
        this.lastVoicedEnd = this.position;
        this.voicedSamples += WINDOW;
      } else if (++this.silentRun >= this.silenceWindows) {
        this.speaking = false;
        this.voicedRun = 0;
        events.push(this.endEvent());
      }
      return;
    }
    if (!voiced) {
      this.voicedRun = 0;
      return;
    }
    if (this.voicedRun++ === 0) this.runStart = start;
    if (this.voicedRun >= this.startWindows) {
      this.speaking = true;
      this.silentRun = 0;
      this.speechStart = this.runStart;
      this.lastVoicedEnd = this.position;
      this.voicedSamples = this.position - this.runStart;
      events.push({ type: 'speech_start', sample: this.runStart });
    }
  }

  private endEvent(): VadEvent {
    return { type: 'speech_end', sample: this.lastVoicedEnd, durationMs: ((this.lastVoicedEnd - this.speechStart) * 1000) / SILERO_RATE };
  }
}
