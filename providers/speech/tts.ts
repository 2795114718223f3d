import { spawn } from 'node:child_process';
import type OpenAI from 'openai';
import { OperationalError } from '../../lib/failures';
import { classifyOpenAiError, openAiClient, withDeadline } from '../llm/openai';
import { downmix, parseWav, WavFormatError } from '../../lib/audio/audio';
import { resampleSincToInt16 } from '../../lib/audio/sinc-resample';
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
 * The embedded synthesizer: Debian's espeak-ng, one process per utterance. The text goes
 * on stdin, never in argv: it is the model's reply, and argv would let a reply starting
 * with `-` be read as an option (and shows in `ps`). SSML is off (no `-m`), so markup in a
 * reply is read as text. espeak writes a streamed WAV at 22,050 Hz on stdout.
 *
 * The natural voice, Piper, is providers/speech/piper.ts (TTS_ENGINE=piper); it uses espeak-ng
 * for its phonemes and falls back to this synthesizer when its model is missing.
 */
export class EspeakSynthesizer implements SpeechSynthesizer {
  constructor(private readonly opts: EspeakOptions = {}) {}

  synthesize(text: string, signal?: AbortSignal): Promise<Int16Array> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const { voice = 'en-us', wordsPerMinute = 160, pitch, executable = 'espeak-ng', timeoutMs = 30_000 } = this.opts;
    const args = ['--stdout', '--stdin', '-v', voice, '-s', String(wordsPerMinute), ...(pitch !== undefined ? ['-p', String(pitch)] : [])];
    return new Promise<Int16Array>((resolve, reject) => {
      const child = spawn(executable, args, { stdio: ['pipe', 'pipe', 'pipe'] });
      const chunks: Buffer[] = [];
      let stderr = '';
      let failure: unknown = null;
      const stop = (why: unknown) => {
        failure ??= why;
        child.kill('SIGKILL');
      };
      const onAbort = () => stop(abortReason(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      const timer = setTimeout(() => stop(new SpeechSynthesisError(`speech synthesis exceeded ${Math.round(timeoutMs / 1000)} s`, true)), timeoutMs);
      child.stdout.on('data', (c: Buffer) => chunks.push(c));
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
      child.on('error', (err: NodeJS.ErrnoException) => {
        stop(
          err.code === 'ENOENT'
            ? new SpeechSynthesisError('the embedded speech synthesizer needs espeak-ng, which is not installed', false, { detail: err.message })
            : new SpeechSynthesisError('espeak-ng could not start', true, { detail: err.message }),
        );
      });
      // A child killed before it read its input closes stdin under us: not a failure of its own.
      child.stdin.on('error', () => undefined);
      child.stdin.end(text);
      child.on('close', (code) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (failure) return reject(failure);
        if (code !== 0) return reject(new SpeechSynthesisError('espeak-ng failed', false, { detail: stderr.trim() || `exit ${code}` }));
        try {
          resolve(speechWav(Buffer.concat(chunks)));
        } catch (err) {
          reject(new SpeechSynthesisError('espeak-ng answered audio that is not a WAV', false, { detail: (err as Error).message }));
        }
      });
    });
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
