/**
 * The agent's side of a live call, whatever carries it (direct WebRTC, LiveKit, SIP).
 *
 * Audio inside the service is 16-bit signed PCM, mono, at MEDIA_RATE (8 kHz, 20 ms
 * frames of 160 samples): what G.711 carries on the direct WebRTC leg (PCMU) and on SIP
 * trunks, so every leg speaks one format. Speech-to-text upsamples to 16 kHz; LiveKit's
 * agent leg resamples at its edge.
 */

/** Samples per second of every PCM frame that crosses a MediaLeg. */
export const MEDIA_RATE = 8000;
/** One frame: 20 ms. */
export const FRAME_SAMPLES = 160;
export const FRAME_MS = 20;

/** The transcript frame of the contract, sent on the data channel / topic `transcript`. */
export interface TranscriptFrame {
  type: 'transcript';
  speaker: 'user' | 'assistant';
  text: string;
  /** Milliseconds since the epoch. */
  timestamp: number;
  partial: boolean;
}

/**
 * The agent's side of one live call: audio in and out as MEDIA_RATE frames, plus the
 * data channel for transcript frames. Transport-independent: the pipeline only sees this.
 */
export interface MediaLeg {
  /** Called for each 20 ms frame the remote party sends (MEDIA_RATE, mono). */
  onAudio(listener: (frame: Int16Array) => void): void;
  /** Queues agent audio (any length, MEDIA_RATE mono); it is paced out in real time. */
  play(samples: Int16Array): void;
  /** Drops queued agent audio at once (barge-in). */
  clearPlayback(): void;
  /** Whether queued agent audio is still being played (queued, or sent and not yet played out at the far end). */
  readonly playing: boolean;
  /**
   * Observes agent audio as it is actually sent (the recorder's agent track): frames cut by barge-in never appear.
   * `aheadMs`: how long before its play time the frame left (an RTP leg sends a little ahead: paced-leg SEND_AHEAD_MS).
   */
  onPlayed(listener: (frame: Int16Array, aheadMs: number) => void): void;
  /**
   * How far ahead of its play time agent audio is sent from now on (null: the leg's default). The agent sets 0 while
   * the caller talks over it, so that a barge-in is not followed by audio already on its way. Absent: not adjustable.
   */
  setSendAhead?(ms: number | null): void;
  /** Sends a transcript frame (data channel labelled/topic `transcript`); dropped if the channel is not open. */
  sendTranscript(frame: TranscriptFrame): void;
  /** Each key the other party presses (RFC 4733 events on a SIP leg), once per press; absent where there is no keypad (the browser). */
  onDigit?(listener: (digit: string) => void): void;
  /** Presses keys on the line (0-9 * # A-D), resolved once sent; absent where there is no keypad. Rejects when the far end takes no digits. */
  sendDigits?(digits: string): Promise<void>;
  /**
   * Hands the call to `target` (an E.164 number or an extension; checked against the
   * destination policy by the caller) — SIP REFER on a SIP trunk's leg. `ok`: the target
   * answered and the leg ends `transferred`; otherwise the call goes on as before.
   */
  transfer?(target: string): Promise<{ ok: boolean; status: number; reason: string }>;
  /** Resolves when the remote side leaves or the connection is lost, with a reason. */
  readonly ended: Promise<string>;
  close(): Promise<void>;
}
