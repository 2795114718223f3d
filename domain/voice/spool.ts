import { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { VoiceRecordingChunk } from '../../db/entities';
import type { BlobStore } from '../ports/blob-store';
import { withBlobLock } from '../storage/blob-refs';
import type { RecordingChunk, RecordingSpool, RecordingTrack } from './recorder';

/** Longest chunk the recorder cuts, with room to spare (5 s of 8 kHz PCM16 is 80 KB). */
const MAX_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * The recorder's durable spool: each chunk's PCM in the content-addressed blob store, its
 * place in `voice_recording_chunks`. Any worker can finalize a session from it, so a call
 * whose worker died keeps its audio up to the last spooled chunk.
 */
export class PgRecordingSpool implements RecordingSpool {
  /** A blob owner kind (BlobRefRepository): how many spooled chunks refer to these bytes. */
  static blobUses(em: EntityManager, sha256: string): Promise<number> {
    return em.count(VoiceRecordingChunk, { blobSha256: sha256 });
  }

  constructor(
    private readonly em: EntityManager,
    private readonly blobs: BlobStore,
    private readonly sessionId: string,
  ) {}

  async saveChunk(track: RecordingTrack, seq: number, startSample: number, pcm: Buffer): Promise<void> {
    const staged = await this.blobs.stage(Readable.from([pcm]), MAX_CHUNK_BYTES);
    // Under the blob's lock: another session's spool releasing the same bytes (5 s of silence is the same chunk in every
    // call) either sees this row or has deleted them before this commit writes them again.
    await withBlobLock(this.em, staged.sha256, async (tx) => {
      const sha = await this.blobs.commit(staged);
      await tx
        .createQueryBuilder(VoiceRecordingChunk)
        .insert({ sessionId: this.sessionId, track, seq, startSample, blobSha256: sha, createdAt: new Date() })
        .onConflict(['sessionId', 'track', 'seq'])
        .ignore();
    });
  }

  async *chunks(track: RecordingTrack): AsyncIterable<RecordingChunk> {
    const rows = await this.em.fork().find(VoiceRecordingChunk, { sessionId: this.sessionId, track }, { orderBy: { seq: 'asc' } });
    for (const row of rows) {
      const stream = await this.blobs.open(row.blobSha256);
      const parts: Buffer[] = [];
      for await (const part of stream) parts.push(part as Buffer);
      yield { seq: row.seq, startSample: Number(row.startSample), pcm: Buffer.concat(parts) };
    }
  }
}
