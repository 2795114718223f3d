import { dbfs } from './audio';
import { FRAME_SAMPLES, MEDIA_RATE } from './media-leg';

/**
 * Voice activity detection on the caller's audio: where a turn starts and ends, so the
 * pipeline knows when to stop the agent talking (barge-in) and when to send what was said
 * to speech-to-text.
 *
 * Energy-based, on 20 ms frames: a frame is voiced when it is loud enough above the noise
 * floor. The floor is the quietest frame of the last `floorWindowMs` (minimum statistics):
 * speech always has quieter moments between syllables and words, while steady noise
 * (a fan, a line's hiss) is its own minimum, so the floor follows the line within that
 * window without ever being pulled up by the speech itself. A sudden lasting rise of the
 * noise reads as speech until the window has passed (then the turn ends as usual).
 *
 * Hysteresis: a turn starts only after `startMs` of voiced frames in a row (a click or a
 * cough of 40 ms is not a turn), and, once started, a frame counts as speech at a lower
 * margin (`continueDb`), so the quiet ends of words do not cut the turn; it ends after
 * `silenceMs` without speech.
 */
export interface VadOptions {
  /** Samples per second of the frames (MEDIA_RATE). */
  sampleRate?: number;
  /** Samples per analysis frame (FRAME_SAMPLES, 20 ms); frames pushed in other sizes are re-cut. */
  frameSamples?: number;
  /** Voiced audio needed in a row before speech_start (default 80 ms; 60–100 ms is the usual range). */
  startMs?: number;
  /** Silence after speech before speech_end (default 500 ms). */
  silenceMs?: number;
  /** dB above the noise floor for a frame to start speech (default 12). */
  startDb?: number;
  /** dB above the noise floor for a frame to keep speech going (default 6). */
  continueDb?: number;
  /** Frames quieter than this are never speech, whatever the floor (default -50 dBFS; digital silence would make any whisper "speech"). */
  minSpeechDbfs?: number;
  /** How far back the noise floor looks for the quietest frame (default 2000 ms). */
  floorWindowMs?: number;
}

export type VadEvent =
  /** `sample`: where the speech began (start of its first voiced frame), counted from the first sample pushed. */
  | { type: 'speech_start'; sample: number }
  /** `sample`: where the speech ended (end of its last voiced frame); `durationMs` of the turn, start to end. */
  | { type: 'speech_end'; sample: number; durationMs: number };

/** Frames quieter than this (digital silence is -Infinity) count as this level. */
const LEVEL_FLOOR_DB = -100;

export class Vad {
  readonly sampleRate: number;
  readonly frameSamples: number;
  private readonly startFrames: number;
  private readonly silenceFrames: number;
  private readonly startDb: number;
  private readonly continueDb: number;
  private readonly minSpeechDbfs: number;
  /** Levels (dBFS) of the last floorWindowMs of frames, a ring. */
  private readonly levels: Float64Array;
  private filled = 0;
  private ring = 0;
  /** A partial frame carried to the next push. */
  private pending: Int16Array;
  private pendingLength = 0;
  /** Samples analysed so far (whole frames). */
  private position = 0;
  private speaking = false;
  private voicedRun = 0;
  private runStart = 0;
  private silentRun = 0;
  private speechStart = 0;
  private lastVoicedEnd = 0;
  private voicedSamples = 0;

  constructor(opts: VadOptions = {}) {
    this.sampleRate = opts.sampleRate ?? MEDIA_RATE;
    this.frameSamples = opts.frameSamples ?? FRAME_SAMPLES;
    const frameMs = (this.frameSamples * 1000) / this.sampleRate;
    this.startFrames = Math.max(1, Math.round((opts.startMs ?? 80) / frameMs));
    this.silenceFrames = Math.max(1, Math.round((opts.silenceMs ?? 500) / frameMs));
    this.startDb = opts.startDb ?? 12;
    this.continueDb = opts.continueDb ?? 6;
    this.minSpeechDbfs = opts.minSpeechDbfs ?? -50;
    this.levels = new Float64Array(Math.max(1, Math.round((opts.floorWindowMs ?? 2000) / frameMs)));
    this.pending = new Int16Array(this.frameSamples);
  }

  /** Whether a turn is under way (between speech_start and speech_end). */
  get inSpeech(): boolean {
    return this.speaking;
  }

  /** The current noise floor in dBFS (the quietest recent frame). */
  get noiseFloorDbfs(): number {
    let min = Infinity;
    for (let i = 0; i < this.filled; i++) min = Math.min(min, this.levels[i]);
    return this.filled ? min : LEVEL_FLOOR_DB;
  }

  /** During a turn: how long it has been quiet since its last voiced frame, in ms (0 outside a turn). */
  get trailingSilenceMs(): number {
    return this.speaking ? ((this.position - this.lastVoicedEnd) * 1000) / this.sampleRate : 0;
  }

  /** During a turn: where its last voiced frame ended (the `sample` its speech_end will carry if no speech follows). */
  get lastVoicedSample(): number {
    return this.lastVoicedEnd;
  }

  /** Speech heard in the current turn (voiced frames only), ms; 0 outside a turn. */
  get voicedMs(): number {
    return this.speaking ? (this.voicedSamples * 1000) / this.sampleRate : 0;
  }

  /** Samples analysed since the start (the clock the events' `sample` counts on). */
  get samplesSeen(): number {
    return this.position;
  }

  /** Feeds audio (normally one 20 ms frame); returns the events it caused, in order. */
  push(samples: Int16Array): VadEvent[] {
    const events: VadEvent[] = [];
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(this.frameSamples - this.pendingLength, samples.length - offset);
      // A whole frame pushed as is needs no copy.
      if (this.pendingLength === 0 && take === this.frameSamples) {
        this.frame(samples.subarray(offset, offset + take), events);
      } else {
        this.pending.set(samples.subarray(offset, offset + take), this.pendingLength);
        this.pendingLength += take;
        if (this.pendingLength === this.frameSamples) {
          this.pendingLength = 0;
          this.frame(this.pending, events);
        }
      }
      offset += take;
    }
    return events;
  }

  /** The stream ended (the caller hung up): ends a turn under way at its last voiced frame. */
  finish(): VadEvent[] {
    if (!this.speaking) return [];
    this.speaking = false;
    return [this.endEvent()];
  }

  private frame(frame: Int16Array, events: VadEvent[]): void {
    const level = Math.max(LEVEL_FLOOR_DB, dbfs(frame));
    this.levels[this.ring] = level;
    this.ring = (this.ring + 1) % this.levels.length;
    this.filled = Math.min(this.filled + 1, this.levels.length);
    const floor = this.noiseFloorDbfs;
    const start = this.position;
    this.position += frame.length;

    const voiced = level >= Math.max(this.minSpeechDbfs, floor + (this.speaking ? this.continueDb : this.startDb));
    if (this.speaking) {
      if (voiced) {
        this.silentRun = 0;
        this.lastVoicedEnd = this.position;
        this.voicedSamples += frame.length;
      } else if (++this.silentRun >= this.silenceFrames) {
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
    if (this.voicedRun >= this.startFrames) {
      this.speaking = true;
      this.silentRun = 0;
      this.speechStart = this.runStart;
      this.lastVoicedEnd = this.position;
      this.voicedSamples = this.position - this.runStart;
      events.push({ type: 'speech_start', sample: this.runStart });
    }
  }

  private endEvent(): VadEvent {
    return { type: 'speech_end', sample: this.lastVoicedEnd, durationMs: ((this.lastVoicedEnd - this.speechStart) * 1000) / this.sampleRate };
  }
}
