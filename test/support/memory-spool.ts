import type { RecordingChunk, RecordingSpool, RecordingTrack } from '../../domain/voice/recorder';

/**
 * RecordingSpool in memory, for tests only (the real one keeps rows in PostgreSQL and the
 * bytes in the BlobStore). It behaves as the real one must: a (track, seq) saved twice
 * keeps the first; chunks come back in seq order; `failNext` makes saves fail, as a
 * database that is briefly away.
 */
export class MemorySpool implements RecordingSpool {
  readonly stored: Record<RecordingTrack, Map<number, RecordingChunk>> = { caller: new Map(), agent: new Map() };
  /** Saves still to fail. */
  failNext = 0;
  saves = 0;

  async saveChunk(track: RecordingTrack, seq: number, startSample: number, pcm: Buffer): Promise<void> {
    this.saves++;
    await Promise.resolve();
    if (this.failNext > 0) {
      this.failNext--;
      throw new Error('database is away');
    }
    if (!this.stored[track].has(seq)) this.stored[track].set(seq, { seq, startSample, pcm: Buffer.from(pcm) });
  }

  async *chunks(track: RecordingTrack): AsyncIterable<RecordingChunk> {
    for (const seq of [...this.stored[track].keys()].sort((a, b) => a - b)) yield this.stored[track].get(seq)!;
  }

  list(track: RecordingTrack): Array<{ seq: number; startSample: number; samples: number }> {
    return [...this.stored[track].values()].sort((a, b) => a.seq - b.seq).map((c) => ({ seq: c.seq, startSample: c.startSample, samples: c.pcm.length / 2 }));
  }
}
