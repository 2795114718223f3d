import { type Transcriber } from '../../lib/extract';
import { LocalWhisperTranscriber } from './whisper';
import { MoonshineTranscriber } from './moonshine';
import { OpenAiTranscriber } from './openai-transcriber';
import { encodeWav } from '../../lib/audio/audio';
import { MEDIA_RATE } from '../../domain/ports/voice';
import { type SpeechRecognizer, type RecognizeOptions } from '../../domain/ports/speech';
export { type SpeechRecognizer, type RecognizeOptions } from '../../domain/ports/speech';

/** Silence put around a turn before a model hears it (see EmbeddedSpeechRecognizer). */
const PAD_MS = 300;

/** An embedded model a voice turn can go to: whisper.cpp (any language) or Moonshine (English only, several times cheaper). */
export type EmbeddedSpeechModel = LocalWhisperTranscriber | MoonshineTranscriber;

/**
 * The embedded models: the turn handed at 8 kHz to the model's thread, which upsamples it to 16 kHz float32
 * (low-passed: see lib/audio upsample; in the thread, because on the voice worker's event loop it held the pacing of
 * every call's audio 30-90 ms at 4 sessions) and hears it there (each model family has its own one-at-a-time queue:
 * whisper's is shared with file transcription). The turn gets PAD_MS of silence on each side: both models drop
 * the first words of audio that starts on the first syllable (measured here: Whisper heard
 * "What are your opening hours" after a μ-law line as "your opening hour." unpadded;
 * Moonshine answered nothing for a third of short espeak-ng turns), whole when padded.
 */
export class EmbeddedSpeechRecognizer implements SpeechRecognizer {
  /**
   * `language`: a short turn is too little for Whisper to detect its language (VOICE_LANGUAGE;
   * 'auto' is the transcriber's; Moonshine hears English only). `partials`: the model for
   * partial transcripts (default `final`'s).
   */
  constructor(
    private readonly final: EmbeddedSpeechModel,
    private readonly language?: string,
    private readonly partials: EmbeddedSpeechModel = final,
  ) {}

  /** The model files (Moonshine: its directory) used for finals and partials (the same when there is one model). */
  get modelPaths(): { final: string; partial: string } {
    return { final: this.final.modelPath, partial: this.partials.modelPath };
  }

  async transcribe(samples: Int16Array, signal?: AbortSignal, options: RecognizeOptions = {}): Promise<string> {
    const model = options.partial ? this.partials : this.final;
    // A copy, whose buffer goes to the model's thread, which upsamples and pads it there (the caller keeps `samples`).
    const turn = { padMs: PAD_MS, signal, whileQueued: options.whileQueued };
    if (model instanceof MoonshineTranscriber) return (await model.transcribePcm(samples.slice(), MEDIA_RATE, turn)).text;
    return (await model.transcribePcm(samples.slice(), MEDIA_RATE, { ...turn, ...(this.language && this.language !== 'auto' ? { language: this.language } : {}) })).text;
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
 * app/voice.ts voiceSpeechModels); the transcriber's own model where not given. With
 * an HTTP transcriber (TRANSCRIBE_BASE_URL) calls use it too, whatever `models` says.
 */
export function speechRecognizerFor(
  transcriber: Transcriber | null,
  language?: string,
  models: { final?: EmbeddedSpeechModel | null; partial?: EmbeddedSpeechModel | null } = {},
): SpeechRecognizer | null {
  if (transcriber instanceof LocalWhisperTranscriber) return new EmbeddedSpeechRecognizer(models.final ?? transcriber, language, models.partial ?? models.final ?? transcriber);
  if (transcriber instanceof OpenAiTranscriber) return new HttpSpeechRecognizer(transcriber);
  return null;
}
