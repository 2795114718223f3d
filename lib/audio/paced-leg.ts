import { FRAME_MS, FRAME_SAMPLES, type MediaLeg, type TranscriptFrame } from './media-leg';

/** 5 s of audio received before the agent listens. */
const EARLY_FRAMES = 250;

/**
 * How far ahead of its play time agent audio is sent (ms). The far end's jitter buffer
 * (a browser's NetEq, a phone's) holds early packets and plays them by their RTP
 * timestamps, so audio sent ahead rides out a stall of our event loop (another call's
 * turn, a GC) as long as the stall is shorter than the lead; a leg paced exactly on the
 * clock is heard to gap at every stall longer than the far end's buffer. The cost: after
 * barge-in the caller still hears what was sent ahead (at most this much).
 */
export const SEND_AHEAD_MS = 80;

/**
 * The audio half of a MediaLeg that any RTP-based leg (direct WebRTC, SIP) shares:
 * received frames are handed to listeners, agent audio is queued and paced out one 20 ms
 * frame at a time against the wall clock, each frame sent up to `sendAheadMs` before its
 * play time (SEND_AHEAD_MS; a late timer sends what is due, never further ahead), and
 * barge-in drops the queue at once. Each frame's play time is its RTP timestamp's: a
 * reply queued while the last one is still playing at the far end follows on without a
 * gap. Subclasses say how a frame leaves and how transcript frames travel.
 */
export abstract class PacedLeg implements MediaLeg {
  private readonly listeners: Array<(frame: Int16Array) => void> = [];
  private queue: Int16Array[] = [];
  /** Samples of the head frame already sent (a partial head frame is kept across ticks). */
  private timer: NodeJS.Timeout | null = null;
  private nextDue = 0;
  private talkspurt = true;
  private rtpTimestamp = Math.floor(Math.random() * 0xffffffff);
  private settle!: (reason: string) => void;
  readonly ended: Promise<string>;
  private closed = false;
  private readonly played: Array<(frame: Int16Array, aheadMs: number) => void> = [];
  /** When the last frame sent ends playing at the far end (epoch ms; 0: none sent). */
  private sentUntil = 0;

  private sendAheadMs: number;

  constructor(private readonly defaultSendAheadMs = SEND_AHEAD_MS) {
    this.sendAheadMs = defaultSendAheadMs;
    this.ended = new Promise((resolve) => (this.settle = resolve));
  }

  /** How far ahead frames go from now on (null: the leg's default); 0 sends each when due (the caller talking over the agent). */
  setSendAhead(ms: number | null): void {
    this.sendAheadMs = ms ?? this.defaultSendAheadMs;
  }

  /** Sends one frame; `dueAt` (epoch ms) is when the far end is to play it (up to sendAheadMs from now; in the past when the frame is late). */
  protected abstract sendFrame(frame: Int16Array, marker: boolean, rtpTimestamp: number, dueAt: number): void;
  abstract sendTranscript(frame: TranscriptFrame): void;
  protected abstract release(): Promise<void>;

  /** Frames that arrived before anyone listened (the caller may speak the moment media connects). */
  private early: Int16Array[] | null = [];

  onAudio(listener: (frame: Int16Array) => void): void {
    this.listeners.push(listener);
    const early = this.early;
    this.early = null;
    for (const f of early ?? []) listener(f);
  }

  /** `aheadMs`: how long before its play time the frame was sent (0 when on time or late). */
  onPlayed(listener: (frame: Int16Array, aheadMs: number) => void): void {
    this.played.push(listener);
  }

  /** Subclasses call this with each decoded 20 ms frame from the remote side. */
  protected received(frame: Int16Array): void {
    if (this.early) {
      // Kept until the first listener, at most EARLY_FRAMES (the oldest dropped).
      this.early.push(frame);
      if (this.early.length > EARLY_FRAMES) this.early.shift();
      return;
    }
    for (const l of this.listeners) l(frame);
  }

  /** Agent audio queued, or sent and not yet played out at the far end. */
  get playing(): boolean {
    return this.queue.length > 0 || Date.now() < this.sentUntil;
  }

  play(samples: Int16Array): void {
    if (this.closed || samples.length === 0) return;
    for (let i = 0; i < samples.length; i += FRAME_SAMPLES) {
      const frame = new Int16Array(FRAME_SAMPLES);
      frame.set(samples.subarray(i, Math.min(samples.length, i + FRAME_SAMPLES)));
      this.queue.push(frame);
    }
    if (!this.timer) {
      const now = Date.now();
      if (now >= this.sentUntil) {
        // A new talkspurt: a gap in media time, and the marker.
        if (this.sentUntil) this.rtpTimestamp = (this.rtpTimestamp + FRAME_SAMPLES * 10) >>> 0;
        this.nextDue = now;
        this.talkspurt = true;
      } // else the last reply is still playing at the far end: this one follows on from its end.
      this.tick();
    }
  }

  /** Drops queued audio; what was sent ahead already is the far end's (at most sendAheadMs). */
  clearPlayback(): void {
    this.queue = [];
    this.sentUntil = Math.min(this.sentUntil, Date.now());
  }

  private tick = (): void => {
    this.timer = null;
    if (this.closed) return;
    const now = Date.now();
    // Past 200 ms late (a stalled event loop), skip ahead rather than burst.
    if (now - this.nextDue > 200) this.nextDue = now;
    while (this.queue.length && this.nextDue <= now + this.sendAheadMs) {
      const frame = this.queue.shift()!;
      // Its play time is its place in media time (a late frame is late at the far end too).
      const dueAt = this.nextDue;
      this.sendFrame(frame, this.talkspurt, this.rtpTimestamp >>> 0, dueAt);
      for (const l of this.played) l(frame, Math.max(0, dueAt - now));
      this.talkspurt = false;
      this.rtpTimestamp = (this.rtpTimestamp + FRAME_SAMPLES) >>> 0;
      this.nextDue += FRAME_MS;
      this.sentUntil = this.nextDue;
    }
    // Woken when the head frame may go (one frame's time before it would fall under the lead).
    if (this.queue.length) this.timer = setTimeout(this.tick, Math.max(1, this.nextDue - this.sendAheadMs - Date.now()));
  };

  /** Subclasses call this when the remote side is gone. */
  protected end(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.queue = [];
    this.settle(reason);
  }

  async close(): Promise<void> {
    this.end('closed');
    await this.release();
  }
}
