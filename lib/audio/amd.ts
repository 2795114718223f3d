import { dbfs } from './audio';
import { toneShare } from './dtmf';
import { FRAME_MS, FRAME_SAMPLES, MEDIA_RATE } from './media-leg';
import { Vad } from './vad';

/**
 * Answering-machine detection on the first seconds of an answered outbound call, the
 * classic heuristic (as Asterisk's AMD and the carriers' do it, on energy alone): a
 * person answers with a short word ("Hello?", "Yes, speaking") and then waits for the
 * caller; a machine plays a greeting that talks on for seconds ("Hi, you've reached Sam,
 * I can't take your call right now, please leave a message after the tone"), pausing only
 * briefly between its phrases, and often ends in a beep.
 *
 *   - speech that runs on for `maxGreetingMs` (pauses shorter than `pauseMs` do not break
 *     it) → machine;
 *   - a beep (a steady pure tone, see BeepDetector) → machine;
 *   - a greeting shorter than that, then `pauseMs` of silence → human;
 *   - nothing said within `initialSilenceMs`, or no decision by `maxMs` → unknown (the
 *     call goes on as if a person answered: silence is no proof of a machine).
 */
export type AnsweredBy = 'human' | 'machine' | 'unknown';

export interface AmdOptions {
  /** Speech this long without a pause is a machine's greeting (default 2500 ms). */
  maxGreetingMs?: number;
  /** Silence this long after the first words ends a person's greeting (default 800 ms). */
  pauseMs?: number;
  /** No speech within this long: unknown (default 4000 ms). */
  initialSilenceMs?: number;
  /** The decision is taken by this long at the latest (default 5000 ms). */
  maxMs?: number;
}

export interface AmdDecision {
  answeredBy: AnsweredBy;
  /** Why, in words (for logs and the call's record). */
  reason: string;
  /** When it was decided, in ms from the first frame. */
  atMs: number;
}

export class AnsweringMachineDetector {
  private readonly vad: Vad;
  private readonly beep = new BeepDetector();
  private readonly o: Required<AmdOptions>;
  private frames = 0;
  private speechStartMs: number | null = null;
  private lastSpeechEndMs: number | null = null;
  private decision: AmdDecision | null = null;

  constructor(o: AmdOptions = {}) {
    this.o = { maxGreetingMs: 2500, pauseMs: 800, initialSilenceMs: 4000, maxMs: 5000, ...o };
    // A word's quiet end must not end it: the VAD's own silence is the pause that separates a person's greeting from the wait.
    this.vad = new Vad({ sampleRate: MEDIA_RATE, silenceMs: this.o.pauseMs, startMs: 60 });
  }

  /** Pushes one 20 ms frame (MEDIA_RATE); the decision once taken (then the same one for every later frame). */
  push(frame: Int16Array): AmdDecision | null {
    if (this.decision) return this.decision;
    this.frames++;
    const now = this.frames * FRAME_MS;
    const decide = (answeredBy: AnsweredBy, reason: string) => (this.decision = { answeredBy, reason, atMs: now });
    if (this.beep.push(frame)) return decide('machine', `a ${Math.round(this.beep.lastHz)} Hz beep`);
    for (const e of this.vad.push(frame)) {
      if (e.type === 'speech_start') {
        // The greeting runs from its first word; a new phrase after a short pause carries it on.
        this.speechStartMs ??= (e.sample / MEDIA_RATE) * 1000;
        this.lastSpeechEndMs = null;
      } else {
        this.lastSpeechEndMs = (e.sample / MEDIA_RATE) * 1000;
      }
    }
    if (this.speechStartMs !== null) {
      const talking = (this.lastSpeechEndMs ?? now) - this.speechStartMs;
      if (talking >= this.o.maxGreetingMs) return decide('machine', `a greeting of over ${this.o.maxGreetingMs} ms without a pause`);
      // The VAD ends speech after pauseMs of silence: a short greeting, then a wait.
      if (this.lastSpeechEndMs !== null) return decide('human', `a greeting of ${Math.round(talking)} ms, then silence`);
    } else if (now >= this.o.initialSilenceMs) {
      return decide('unknown', `no speech in the first ${this.o.initialSilenceMs} ms`);
    }
    if (now >= this.o.maxMs) return decide('unknown', `no decision in ${this.o.maxMs} ms`);
    return null;
  }
}

/** The frequencies a beep is looked for at: 300-2500 Hz every 25 Hz (a quarter of a 20 ms block's bin: at most 1 dB lost between two). */
const BEEP_HZ = Array.from({ length: 89 }, (_, i) => 300 + 25 * i);

/**
 * An answering machine's beep: one frequency (machines use 400-2000 Hz, most often about
 * 1 kHz) holding most of each 20 ms block's energy, loud enough, steady within 50 Hz for
 * `minMs` (default 120 ms). Voices spread their energy over harmonics; a held vowel's
 * strongest harmonic rarely holds 60 % for long. `push` is true on the frame the beep
 * ends (the moment to start speaking), or `endedAt` once it is over.
 */
export class BeepDetector {
  private run = 0;
  private runHz = 0;
  /** The frequency of the last beep heard. */
  lastHz = 0;
  /** Whether a beep of at least minMs is sounding now (its end is reported by push). */
  private sounding = false;
  private readonly minFrames: number;

  constructor(o: { minMs?: number } = {}) {
    this.minFrames = Math.ceil((o.minMs ?? 120) / FRAME_MS);
  }

  /** One frame; true on the first frame after a beep (the beep is over). */
  push(frame: Int16Array): boolean {
    const hz = frame.length >= FRAME_SAMPLES && dbfs(frame) > -40 ? strongestTone(frame) : 0;
    const same = hz > 0 && this.run > 0 && Math.abs(hz - this.runHz) <= 50;
    if (same) {
      this.run++;
    } else {
      const ended = this.sounding;
      this.sounding = false;
      this.run = hz > 0 ? 1 : 0;
      this.runHz = hz;
      if (ended) return true;
      return false;
    }
    if (this.run >= this.minFrames) {
      this.sounding = true;
      this.lastHz = this.runHz;
    }
    return false;
  }
}

/** The frequency holding at least 60 % of the block's energy, or 0. */
function strongestTone(frame: Int16Array): number {
  let best = 0;
  let bestHz = 0;
  for (const hz of BEEP_HZ) {
    const share = toneShare(frame, hz, MEDIA_RATE);
    if (share > best) [best, bestHz] = [share, hz];
  }
  return best >= 0.6 ? bestHz : 0;
}
