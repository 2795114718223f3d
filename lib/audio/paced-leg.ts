import { FRAME_MS, FRAME_SAMPLES, type MediaLeg, type TranscriptFrame } from './media-leg';

/** 5 s of audio received before the agent listens. */
const EARLY_FRAMES = 250;

/**
 * The audio half of a MediaLeg that any RTP-based leg (direct WebRTC, SIP) shares:
 * received frames are handed to listeners, agent audio is queued and paced out one 20 ms
 * frame at a time against the wall clock (a late timer sends what is due, never faster),
 * and barge-in drops the queue at once. Subclasses say how a frame leaves and how
 * transcript frames travel.
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
  private readonly played: Array<(frame: Int16Array) => void> = [];

  constructor() {
    this.ended = new Promise((resolve) => (this.settle = resolve));
  }

  protected abstract sendFrame(frame: Int16Array, marker: boolean, rtpTimestamp: number): void;
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

  onPlayed(listener: (frame: Int16Array) => void): void {
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

  get playing(): boolean {
    return this.queue.length > 0;
  }

  play(samples: Int16Array): void {
    if (this.closed || samples.length === 0) return;
    for (let i = 0; i < samples.length; i += FRAME_SAMPLES) {
      const frame = new Int16Array(FRAME_SAMPLES);
      frame.set(samples.subarray(i, Math.min(samples.length, i + FRAME_SAMPLES)));
      this.queue.push(frame);
    }
    if (!this.timer) {
      this.nextDue = Date.now();
      this.talkspurt = true;
      this.tick();
    }
  }

  clearPlayback(): void {
    this.queue = [];
  }

  private tick = (): void => {
    this.timer = null;
    if (this.closed) return;
    const now = Date.now();
    // Past 200 ms late (a stalled event loop), skip ahead rather than burst.
    if (now - this.nextDue > 200) this.nextDue = now;
    while (this.queue.length && this.nextDue <= now) {
      const frame = this.queue.shift()!;
      this.sendFrame(frame, this.talkspurt, this.rtpTimestamp >>> 0);
      for (const l of this.played) l(frame);
      this.talkspurt = false;
      this.rtpTimestamp = (this.rtpTimestamp + FRAME_SAMPLES) >>> 0;
      this.nextDue += FRAME_MS;
    }
    if (this.queue.length) this.timer = setTimeout(this.tick, Math.max(1, this.nextDue - Date.now()));
    else this.rtpTimestamp = (this.rtpTimestamp + FRAME_SAMPLES * 10) >>> 0; // a gap in media time
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
