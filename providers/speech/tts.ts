import { KILL_ALL_THEN_EXIT_SOURCE, RequestThread } from '../../lib/process/request-thread';
import type OpenAI from 'openai';
import { OperationalError } from '../../lib/failures';
import { classifyOpenAiError, openAiClient, withDeadline } from '../llm/openai';
import { downmix, parseWav, WavFormatError } from '../../lib/audio/audio';
import { resampleSincToInt16, SINC_PLAN_SOURCE, sincPlan } from '../../lib/audio/sinc-resample';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { type SpeechSynthesizer } from '../../domain/ports/speech';
export { type SpeechSynthesizer } from '../../domain/ports/speech';

/** Synthesis failed: `SpeechSynthesisError` when a retry may succeed, `SpeechSynthesisRejected` when not. */
export class SpeechSynthesisError extends OperationalError {
  override readonly name = 'SpeechSynthesisError';
  constructor(
    message: string,
    retryable: boolean,
    opts: { detail?: string; status?: number; retryAfterMs?: number } = {},
  ) {
    super(retryable ? 'SpeechSynthesisError' : 'SpeechSynthesisRejected', message, retryable, opts);
    this.status = opts.status;
  }

  /** The HTTP status, when a speech server answered one. */
  readonly status?: number;
}

/**
 * A synthesizer's WAV as MEDIA_RATE mono: down from 22.05 or 24 kHz through the band-limited
 * sinc (lib/audio/sinc-resample.ts), so the telephone band keeps its top (flat to 3.5 kHz)
 * and nothing above 4 kHz folds back into it.
 */
function speechWav(bytes: Uint8Array): Int16Array {
  const wav = parseWav(bytes);
  const mono = downmix(wav.samples, wav.channels);
  return wav.sampleRate === MEDIA_RATE ? mono : resampleSincToInt16(mono, wav.sampleRate, MEDIA_RATE);
}

/** The signal's reason as the rejection (an AbortError DOMException when none was given). */
function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

export interface EspeakOptions {
  /** espeak-ng voice (`-v`), e.g. `en-us`, `en-gb`, `fr`, `en-us+f3` (default `en-us`). */
  voice?: string;
  /** Words per minute (`-s`, default 160; espeak's own default of 175 is hurried on a phone line). */
  wordsPerMinute?: number;
  /** Pitch 0–99 (`-p`, default espeak's 50). */
  pitch?: number;
  /** The executable (default `espeak-ng` on PATH). */
  executable?: string;
  /** Longest synthesis before it is killed (default 30 s; a sentence takes well under a second). */
  timeoutMs?: number;
}

/**
 * The espeak thread's code (plain JS, so it runs under tsx, Jest and a build alike): it starts espeak-ng for each
 * request, and turns its 22,050 Hz WAV into MEDIA_RATE PCM with the band-limited sinc's weights (computed in the main
 * thread: lib/audio/sinc-resample.ts sincPlan). Measured in a voice session's profile, starting a process from the
 * voice worker (its page tables copied: a process of a gigabyte and more) held the calling thread 35-125 ms, and the
 * resampling 40-70 ms a clause: on the main thread both stalled the 20 ms pacing of the audio being played. A WAV
 * it does not expect (another rate or format) goes back as bytes, for the main thread's parseWav.
 */
const ESPEAK_THREAD = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const { fromRate } = workerData.plan;
const children = new Map();
${SINC_PLAN_SOURCE}
${KILL_ALL_THEN_EXIT_SOURCE}

function pcmOf(buf) {
  if (buf.length < 12 || buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') return null;
  let fmt = null;
  for (let offset = 12; offset + 8 <= buf.length; ) {
    const id = buf.toString('ascii', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    const body = offset + 8;
    if (id === 'fmt ' && body + 16 <= buf.length) fmt = { format: buf.readUInt16LE(body), channels: buf.readUInt16LE(body + 2), rate: buf.readUInt32LE(body + 4), bits: buf.readUInt16LE(body + 14) };
    else if (id === 'data') {
      if (!fmt || fmt.format !== 1 || fmt.bits !== 16 || fmt.channels !== 1 || fmt.rate !== fromRate) return null;
      const end = Math.min(buf.length, body + size);
      const n = Math.floor((end - body) / 2);
      const x = new Int16Array(n);
      for (let i = 0; i < n; i++) x[i] = buf.readInt16LE(body + 2 * i);
      if (!workerData.plan.table) return x;
      const f = applySincPlan(x, workerData.plan);
      const out = new Int16Array(f.length);
      for (let j = 0; j < f.length; j++) {
        const v = Math.round(f[j]);
        out[j] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
      }
      return out;
    }
    offset = body + size + (size & 1);
  }
  return null;
}

// A started espeak-ng waiting for its text, per command line: the next request takes it, and another is started for the
// one after, so a clause's synthesis does not wait for a process to start and load its voice (about half of it).
const spares = new Map();

function start(executable, args) {
  const child = spawn(executable, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const run = { child, chunks: [], stderr: '', spawnError: null, closed: null };
  child.stdout.on('data', (c) => run.chunks.push(c));
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => (run.stderr = (run.stderr + d).slice(-2000)));
  child.on('error', (err) => (run.spawnError = { code: err.code, message: err.message }));
  // A child killed before it read its input closes stdin under us: not a failure of its own.
  child.stdin.on('error', () => undefined);
  child.on('close', (code) => {
    run.closed = { code };
    run.onClose?.();
  });
  return run;
}

function answer(id, run) {
  children.delete(id);
  if (run.spawnError) return parentPort.postMessage({ id, spawnError: run.spawnError });
  if (run.closed.code !== 0) return parentPort.postMessage({ id, exit: run.closed.code, stderr: run.stderr });
  const bytes = Buffer.concat(run.chunks);
  const pcm = pcmOf(bytes);
  if (pcm) parentPort.postMessage({ id, pcm }, [pcm.buffer]);
  else parentPort.postMessage({ id, wav: bytes });
}

parentPort.on('message', (m) => {
  if (m.shutdown) {
    return killAllThenExit([...spares.values(), ...children.values()]);
  }
  if (m.kill !== undefined) {
    children.get(m.kill)?.child.kill('SIGKILL');
    return;
  }
  const key = JSON.stringify([m.executable, m.args]);
  let run = spares.get(key);
  spares.delete(key);
  // A spare that ended on its own (killed from outside, or never started) is not used.
  if (!run || run.closed || run.spawnError) run = start(m.executable, m.args);
  children.set(m.id, run);
  run.child.stdin.end(m.text);
  if (run.closed) answer(m.id, run);
  else run.onClose = () => answer(m.id, run);
  // The next one, unless this command line does not start at all.
  if (!run.spawnError) {
    const spare = start(m.executable, m.args);
    spares.set(key, spare);
    spare.onClose = () => {
      if (spares.get(key) === spare) spares.delete(key);
    };
  }
});
`;

/** The rate espeak-ng writes. */
const ESPEAK_RATE = 22_050;

type EspeakAnswer = { id: number } & ({ pcm: Int16Array } | { wav: Uint8Array } | { exit: number | null; stderr: string } | { spawnError: { code?: string; message: string } });

/** The process's one espeak thread (started at the first synthesis, never holding the process open: a call that waits on it does). */
const espeakThread = new RequestThread<EspeakAnswer>({
  source: ESPEAK_THREAD,
  workerData: () => ({ plan: { fromRate: ESPEAK_RATE, ...sincPlan(ESPEAK_RATE, MEDIA_RATE) } }),
  refWhileBusy: false,
  // The thread died (never expected): the request fails as a spawn failure would.
  lost: (id, why) => ({ id, spawnError: { message: `the espeak thread ${why}` } }),
});

/**
 * The embedded synthesizer: Debian's espeak-ng, one process per utterance, started from the process's espeak thread
 * (ESPEAK_THREAD), which also resamples its audio: the event loop that paces calls' audio never waits for either; the
 * thread keeps one started espeak-ng waiting per command line, so a clause does not wait for one to start (a clause's
 * synthesis p50 49 → 28 ms in a small process, more in a worker's). The
 * text goes on stdin, never in argv: it is the model's reply, and argv would let a reply starting with `-` be read as
 * an option (and shows in `ps`). SSML is off (no `-m`), so markup in a reply is read as text. espeak writes a streamed
 * WAV at 22,050 Hz on stdout.
 *
 * The natural voice, Piper, is providers/speech/piper.ts (TTS_ENGINE=piper); it uses espeak-ng
 * for its phonemes and falls back to this synthesizer when its model is missing.
 */
export class EspeakSynthesizer implements SpeechSynthesizer {
  constructor(private readonly opts: EspeakOptions = {}) {}

  /** Ends the process's espeak thread and its espeak-ng processes (a later synthesis starts them again). */
  static unloadAll(): Promise<void> {
    return espeakThread.close();
  }

  async synthesize(text: string, signal?: AbortSignal): Promise<Int16Array> {
    if (signal?.aborted) throw abortReason(signal);
    const { voice = 'en-us', wordsPerMinute = 160, pitch, executable = 'espeak-ng', timeoutMs = 30_000 } = this.opts;
    const args = ['--stdout', '--stdin', '-v', voice, '-s', String(wordsPerMinute), ...(pitch !== undefined ? ['-p', String(pitch)] : [])];
    const { id, answer } = espeakThread.request({ executable, args, text });
    let failure: unknown = null;
    const stop = (why: unknown) => {
      failure ??= why;
      espeakThread.post({ kill: id });
    };
    const onAbort = () => stop(abortReason(signal!));
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => stop(new SpeechSynthesisError(`speech synthesis exceeded ${Math.round(timeoutMs / 1000)} s`, true)), timeoutMs);
    let a: EspeakAnswer;
    try {
      a = await answer;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    if ('spawnError' in a) {
      throw a.spawnError.code === 'ENOENT'
        ? new SpeechSynthesisError('the embedded speech synthesizer needs espeak-ng, which is not installed', false, { detail: a.spawnError.message })
        : new SpeechSynthesisError('espeak-ng could not start', true, { detail: a.spawnError.message });
    }
    if (failure) throw failure;
    if ('exit' in a) throw new SpeechSynthesisError('espeak-ng failed', false, { detail: a.stderr.trim() || `exit ${a.exit}` });
    if ('pcm' in a) return a.pcm;
    try {
      return speechWav(a.wav);
    } catch (err) {
      throw new SpeechSynthesisError('espeak-ng answered audio that is not a WAV', false, { detail: (err as Error).message });
    }
  }
}

export interface OpenAiSpeechOptions {
  /** Server root, with or without `/v1`. */
  baseUrl: string;
  /** Bearer key; none for a local server. */
  apiKey?: string;
  /** e.g. `tts-1`, `gpt-4o-mini-tts`, or what a compatible server names its model. */
  model: string;
  /** e.g. `alloy`. */
  voice: string;
  /** Deadline for the whole answer, body included (default 30 s). */
  timeoutMs?: number;
}

/**
 * OpenAI-compatible text-to-speech: `POST {base}/v1/audio/speech` with
 * `{model, input, voice, response_format: 'wav'}`, through the shared SDK client
 * (providers/llm/openai: no SDK retries, errors classified once). WAV because it is the one
 * format every compatible server offers that needs no decoder here; OpenAI's is 24 kHz
 * mono, resampled to MEDIA_RATE.
 */
export class OpenAiSpeechSynthesizer implements SpeechSynthesizer {
  private readonly client: OpenAI;
  private readonly timeoutMs: number;

  constructor(private readonly opts: OpenAiSpeechOptions) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.client = openAiClient({ baseUrl: opts.baseUrl, apiKey: opts.apiKey, timeoutMs: this.timeoutMs });
  }

  async synthesize(text: string, signal?: AbortSignal): Promise<Int16Array> {
    if (signal?.aborted) throw abortReason(signal);
    let bytes: ArrayBuffer;
    try {
      bytes = await withDeadline(this.timeoutMs, async (deadline) => {
        const both = signal ? AbortSignal.any([deadline, signal]) : deadline;
        const res = await this.client.audio.speech.create({ model: this.opts.model, input: text, voice: this.opts.voice, response_format: 'wav' }, { signal: both });
        return res.arrayBuffer();
      });
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      const f = classifyOpenAiError(err, this.opts.apiKey);
      const why = f.kind === 'status' ? `HTTP ${f.status}` : f.kind === 'timeout' ? 'no answer in time' : 'the server could not be reached';
      throw new SpeechSynthesisError(`speech synthesis failed (${why})`, f.retryable, { detail: f.detail || undefined, status: f.status, retryAfterMs: f.retryAfterMs });
    }
    try {
      return speechWav(new Uint8Array(bytes));
    } catch (err) {
      if (err instanceof WavFormatError) throw new SpeechSynthesisError('speech synthesis failed (the server did not answer 16-bit PCM WAV)', false, { detail: err.message });
      throw err;
    }
  }
}
