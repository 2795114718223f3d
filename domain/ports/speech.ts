/** Speech's ports: what a call's media pipeline asks of speech-to-text and text-to-speech (providers/speech/). */

/**
 * Speech-to-text of one caller turn (what the VAD cut between speech_start and
 * speech_end), as MEDIA_RATE mono PCM. Both implementations reuse the knowledge base's
 * transcribers (lib/extract), so a deployment configures speech-to-text once
 * (TRANSCRIBE_BASE_URL or the embedded model) for voice notes, files and calls alike.
 *
 * Silence answers '' (the embedded one checks the loudness first: Whisper invents
 * " you" for silence). Failures are TranscriberError (an OperationalError); cancelling
 * through `signal` stops the work.
 */
export interface SpeechRecognizer {
  transcribe(samples: Int16Array, signal?: AbortSignal, options?: RecognizeOptions): Promise<string>;
}

export interface RecognizeOptions {
  /** The words so far while the caller speaks: may go to a faster, less accurate model. */
  partial?: boolean;
  /**
   * Aborted while the work still waits its turn (the embedded model does one at a time):
   * it is dropped, failing with a cancellation. Unlike `signal` it never stops running work
   * (which would cost the embedded model a reload).
   */
  whileQueued?: AbortSignal;
}

/**
 * Text-to-speech for the agent's side of a call. Synthesizers answer whole utterances
 * (the pipeline speaks a reply sentence by sentence, so the first sentence plays while the
 * next is synthesized) as MEDIA_RATE mono PCM, whatever rate the engine speaks.
 *
 * Cancelling (`signal`, on barge-in or hang-up) stops the work and rejects with the
 * signal's own reason, so a caller tells its own cancellation from a failure.
 */
export interface SpeechSynthesizer {
  /** `text` spoken as 8 kHz (MEDIA_RATE) mono 16-bit PCM. */
  synthesize(text: string, signal?: AbortSignal): Promise<Int16Array>;
}
