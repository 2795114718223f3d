import { PacedLeg } from '../../lib/audio/paced-leg';
import { FRAME_MS, FRAME_SAMPLES, type TranscriptFrame } from '../../domain/ports/voice';

/**
 * A MediaLeg in memory: the agent's audio is paced out on the wall clock as by every RTP
 * leg (PacedLeg) and kept with the time each frame left; the caller's audio is fed 20 ms
 * at a time in real time by `speak`; transcript frames are kept.
 */
export class MemoryLeg extends PacedLeg {
  /** Agent frames as they left: Date.now() at sending, when the far end plays them (`due`: up to the send-ahead later), the RTP marker and timestamp. */
  readonly sent: Array<{ at: number; due: number; frame: Int16Array; marker: boolean; ts: number }> = [];
  readonly transcripts: TranscriptFrame[] = [];
  /** When each `clearPlayback` happened (barge-in). */
  readonly cleared: number[] = [];
  private readonly waiters: Array<{ test: (f: TranscriptFrame) => boolean; resolve: (f: TranscriptFrame) => void }> = [];

  protected sendFrame(frame: Int16Array, marker: boolean, rtpTimestamp: number, dueAt: number): void {
    this.sent.push({ at: Date.now(), due: dueAt, frame, marker, ts: rtpTimestamp });
  }

  sendTranscript(frame: TranscriptFrame): void {
    this.transcripts.push(frame);
    for (const w of [...this.waiters]) {
      if (w.test(frame)) {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        w.resolve(frame);
      }
    }
  }

  override clearPlayback(): void {
    if (this.playing) this.cleared.push(Date.now());
    super.clearPlayback();
  }

  protected async release(): Promise<void> {}

  /** The next transcript frame (already sent or to come) that passes `test`. */
  transcript(test: (f: TranscriptFrame) => boolean, timeoutMs = 30_000): Promise<TranscriptFrame> {
    const seen = this.transcripts.find(test);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no such transcript frame within ${timeoutMs} ms; frames: ${JSON.stringify(this.transcripts.map((t) => [t.speaker, t.partial, t.text]))}`)), timeoutMs);
      this.waiters.push({ test, resolve: (f) => (clearTimeout(timer), resolve(f)) });
    });
  }

  /**
   * The caller's audio, 20 ms frames on the wall clock (a late timer sends what is due);
   * `at(ms)` is called as the frame starting at `ms` into the audio is delivered. Resolves with when each frame went.
   */
  async speak(pcm: Int16Array, at?: (ms: number, frameAt: number) => void): Promise<number[]> {
    const started = Date.now();
    const times: number[] = [];
    const frames = Math.ceil(pcm.length / FRAME_SAMPLES);
    for (let i = 0; i < frames; ) {
      const due = Math.floor((Date.now() - started) / FRAME_MS) + 1;
      for (; i < Math.min(due, frames); i++) {
        const frame = new Int16Array(FRAME_SAMPLES);
        frame.set(pcm.subarray(i * FRAME_SAMPLES, Math.min(pcm.length, (i + 1) * FRAME_SAMPLES)));
        const now = Date.now();
        times.push(now);
        at?.(i * FRAME_MS, now);
        this.received(frame);
      }
      if (i < frames) await new Promise((r) => setTimeout(r, Math.max(1, started + i * FRAME_MS - Date.now())));
    }
    return times;
  }

  hangUp(): void {
    this.end('remote_hung_up');
  }
}
