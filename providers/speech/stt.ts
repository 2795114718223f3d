import { type Transcriber } from '../../lib/extract';
import { LocalWhisperTranscriber } from './whisper';
import { OpenAiTranscriber } from './openai-transcriber';
import { SAMPLE_RATE as WHISPER_RATE } from './whisper';
import { encodeWav, int16ToFloat32, resample } from '../../lib/audio/audio';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { type SpeechRecognizer, type RecognizeOptions } from '../../domain/ports/speech';
export { type SpeechRecognizer, type RecognizeOptions } from '../../domain/ports/speech';

/** Silence put around a turn before Whisper hears it (see WhisperSpeechRecognizer). */
const PAD_MS = 300;

/**
 * The embedded whisper.cpp: the turn upsampled to 16 kHz float32 in memory and handed to
 * the process's one model thread (queued behind any file transcription: one at a time).
 * The turn gets PAD_MS of silence on each side: Whisper drops the first words of audio
 * that starts on the first syllable (measured here: "What are your opening hours" after a
 * μ-law line came out as "your opening hour." unpadded, whole when padded).
 */
export class WhisperSpeechRecognizer implements SpeechRecognizer {
  /**
   * `language`: a short turn is too little for Whisper to detect its language (VOICE_LANGUAGE;
   * 'auto' is the transcriber's). `partials`: the model for partial transcripts (default
   * `whisper`'s); both share the process's one transcription queue.
   */
  constructor(
    private readonly whisper: LocalWhisperTranscriber,
    private readonly language?: string,
    private readonly partials: LocalWhisperTranscriber = whisper,
  ) {}

  /** The model files used for finals and partials (the same file when there is one model). */
  get modelPaths(): { final: string; partial: string } {
    return { final: this.whisper.modelPath, partial: this.partials.modelPath };
  }

  async transcribe(samples: Int16Array, signal?: AbortSignal, options: RecognizeOptions = {}): Promise<string> {
    const whisper = options.partial ? this.partials : this.whisper;
    const pcm16k = resample(samples, MEDIA_RATE, WHISPER_RATE);
    const pad = (WHISPER_RATE * PAD_MS) / 1000;
    const padded = new Float32Array(pcm16k.length + 2 * pad);
    padded.set(int16ToFloat32(pcm16k), pad);
    return (await whisper.transcribeSamples(padded, { signal, whileQueued: options.whileQueued, ...(this.language && this.language !== 'auto' ? { language: this.language } : {}) })).text;
  }
}

/**
 * OpenAI-compatible `/v1/audio/transcriptions`: the turn sent as an 8 kHz WAV (whisper
 * servers resample themselves; 16 kB a second instead of 32).
 */
export class HttpSpeechRecognizer implements SpeechRecognizer {
  constructor(private readonly transcriber: OpenAiTranscriber) {}

  async transcribe(samples: Int16Array, signal?: AbortSignal): Promise<string> {
    return (await this.transcriber.transcribeBytes(encodeWav(samples, MEDIA_RATE), 'audio/wav', { signal })).trim();
  }
}

/**
 * The recognizer over what `transcriberFromConfig` built (null when there is none).
 * `models`: other embedded models for the voice agent's finals and partials (see
 * voiceWhisperModels); the transcriber's own model where not given.
 */
export function speechRecognizerFor(
  transcriber: Transcriber | null,
  language?: string,
  models: { final?: LocalWhisperTranscriber | null; partial?: LocalWhisperTranscriber | null } = {},
): SpeechRecognizer | null {
  if (transcriber instanceof LocalWhisperTranscriber) return new WhisperSpeechRecognizer(models.final ?? transcriber, language, models.partial ?? models.final ?? transcriber);
  if (transcriber instanceof OpenAiTranscriber) return new HttpSpeechRecognizer(transcriber);
  return null;
}
