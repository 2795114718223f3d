import type { EntityManager } from '@mikro-orm/postgresql';
import { DomainError } from '../../errors';
import { OperationalError } from '../../../lib/failures';
import { newId } from '../../../lib/ids';
import type { FairPool } from '../../../lib/fair-pool';
import { probeDurationSeconds, sniffType, TranscriberError, type Transcriber } from '../../../lib/extract';
import { BlobGoneError, type BlobStore, type StagedBlob } from '../../ports/blob-store';
import type { BlobRefRepository } from '../../storage/blob-refs';
import { TRANSCRIBER_CREDENTIAL_REFUSED, TRANSCRIBER_UNAVAILABLE, transcriptionFailure, type TranscribeOutcome, type VoiceNote } from './records';

export interface VoiceNoteDeps {
  em: EntityManager;
  blobs: BlobStore;
  /** A voice note's bytes are held (blob_holds) while it is transcribed. */
  blobRefs: Pick<BlobRefRepository, 'holdBlob' | 'holdsOlderThan' | 'releaseHold'>;
  /** Needed for /transcribe; null when none is configured. */
  transcriber: Transcriber | null;
  /** Longest voice note taken, in seconds (WIDGET_TRANSCRIBE_MAX_SECONDS); absent: the transcriber's own cap. */
  maxMediaSeconds?: number;
  /** The process's work pool: voice notes take turns by workspace in its anonymous lane. Absent: they run as they come. */
  pool?: FairPool;
}

/**
 * A widget visitor's voice notes (POST /transcribe): checked and held in the blob store,
 * transcribed in the worker (the `transcribe:<trn_id>` workflow), released once
 * transcribed. Nothing about a note is recorded beyond its hold on the bytes.
 */
export class VoiceNoteService {
  constructor(private readonly deps: VoiceNoteDeps) {}

  /**
   * POST /transcribe's first half: a voice note checked and its bytes committed to the blob
   * store for the worker (the `transcribe:<id>` workflow) to read. Takes ownership of
   * `staged` (committed or discarded). Audio only, by its bytes. The transcriber is an
   * upload prerequisite, so its absence answers the upload codes of the contract (503
   * file_upload_prereq_failed). Nothing about the note is recorded: the workflow releases
   * the bytes once transcribed (releaseVoiceNote).
   */
  async storeVoiceNote(input: { staged: StagedBlob; fileName: string }): Promise<VoiceNote> {
    let committed = false;
    try {
      const type = input.staged.size ? await sniffType(input.staged.tempPath, input.fileName) : null;
      if (type?.kind !== 'audio') throw new DomainError('not_audio', 'file: not an audio file (webm, mp3, wav, ogg, opus, m4a)');
      if (!this.deps.transcriber) {
        throw new DomainError('file_upload_prereq_failed', 'Voice notes need a transcriber, and none is configured (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)');
      }
      // The length the recording states, read before it is stored or queued: a long one costs no transcription.
      const max = this.deps.maxMediaSeconds;
      const seconds = max === undefined ? null : await probeDurationSeconds(input.staged.tempPath);
      if (max !== undefined && seconds !== null && seconds > max) {
        throw new DomainError('invalid_request', `file: the recording is ${Math.ceil(seconds)} s long; voice notes are at most ${max} s`);
      }
      // Held before the bytes are committed: another owner's delete of the same bytes can never fall in between.
      const holdId = await this.deps.blobRefs.holdBlob(this.deps.em, input.staged.sha256, newId('trn'));
      try {
        await this.deps.blobs.commit(input.staged);
      } catch (err) {
        await this.deps.blobRefs.releaseHold(this.deps.em, this.deps.blobs, input.staged.sha256, holdId);
        throw err;
      }
      committed = true;
      return { blobKey: input.staged.sha256, mime: type.mime, size: input.staged.size, holdId };
    } finally {
      if (!committed) await this.deps.blobs.discard(input.staged);
    }
  }

  /**
   * The worker's step (`transcribe` workflow): a stored voice note to text, with this
   * process's transcriber. An empty string is a recording without speech. Failures leave
   * as OperationalErrors: the transcriber's as `TranscriberCredentialRefused` /
   * `TranscriberUnavailable`, a recording over the length limit as `MediaTooLong`, one
   * that cannot be decoded as `ExtractionError`.
   */
  async transcribeStored(blobKey: string, mime: string, signal?: AbortSignal, workspaceId?: string): Promise<string> {
    const transcriber = this.deps.transcriber;
    if (!transcriber) throw new OperationalError(TRANSCRIBER_UNAVAILABLE, 'no transcriber is configured on the worker (TRANSCRIBE_BASE_URL, or the embedded model: npm run models:fetch)', false);
    try {
      // The cap again where the recording is decoded: a container that states no length (a browser's WebM) stops there.
      const run = () => this.deps.blobs.withLocalFile(blobKey, (filePath) => transcriber.transcribe(filePath, mime, { signal, maxSeconds: this.deps.maxMediaSeconds }));
      // Anyone may send voice notes: they wait in the anonymous lane, workspace by workspace (a note of a workflow started before the workspace was passed is a turn of its own).
      const text = this.deps.pool ? await this.deps.pool.run({ workspaceId: workspaceId ?? '', anonymous: true }, run) : await run();
      return text.trim();
    } catch (err) {
      if (err instanceof TranscriberError) {
        throw new OperationalError(err.credentialRefused ? TRANSCRIBER_CREDENTIAL_REFUSED : TRANSCRIBER_UNAVAILABLE, err.reason, err.retryable && !err.credentialRefused, { detail: err.detail });
      }
      // The note's own failures (too long, not decodable) and lost bytes as they are.
      if (err instanceof OperationalError || err instanceof BlobGoneError) throw err;
      // The HTTP transcriber's network errors and time-outs (thrown as they are): the service's failure, not the note's.
      throw new OperationalError(TRANSCRIBER_UNAVAILABLE, 'transcription failed', true, { detail: err instanceof Error ? err.message : String(err) });
    }
  }

  /**
   * Drops a transcribed voice note's hold on its bytes, and the bytes unless another owner
   * of any kind (an upload, a knowledge-base file, msgapp media, a recording, another voice
   * note…, in any workspace) has the same ones: the store is content-addressed and shared.
   */
  async releaseVoiceNote(blobKey: string, holdId?: string): Promise<void> {
    await this.deps.blobRefs.releaseHold(this.deps.em, this.deps.blobs, blobKey, holdId);
  }

  /** Voice notes held since before `before` (id `trn_…`, their workflow `transcribe:trn_…`), for the reconciliation. */
  voiceNotesHeld(before: Date, limit: number): Promise<Array<{ id: string; sha256: string }>> {
    return this.deps.blobRefs.holdsOlderThan(this.deps.em, 'trn_', before, limit);
  }

  /**
   * POST /transcribe's answer once the workflow ended: the transcript, 422
   * empty_transcript for a recording without speech, 413 media_too_long past
   * TRANSCRIBE_MAX_SECONDS, 400 invalid_request for one that cannot be decoded, 503
   * file_upload_prereq_failed / missing_credential for the transcriber.
   */
  transcriptAnswer(outcome: TranscribeOutcome): { transcript: string } {
    if (outcome.status === 'error') {
      const failure = transcriptionFailure(outcome);
      if (failure) throw failure;
      if (outcome.failure === 'unreadable') throw new DomainError('invalid_request', `file: could not be read (${outcome.reason})`);
      throw new Error(`voice note: ${outcome.reason}`);
    }
    if (!outcome.transcript) throw new DomainError('empty_transcript', 'No speech was found in the recording');
    return { transcript: outcome.transcript };
  }
}
