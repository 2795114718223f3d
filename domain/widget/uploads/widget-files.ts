import { DomainError } from '../../errors';
import type { BlobStore, StagedBlob } from '../../ports/blob-store';
import { noWorkflowService, type TranscriptionRuns, type UploadRuns } from '../../ports/workflow-runs';
import type { WidgetSessionService } from '../sessions';
import type { SiteRow } from '../sites';
import type { UploadResult, UploadService, UploadStatus } from './records';
import type { UploadSearchService } from './search';
import type { VoiceNoteService } from './voice-notes';

type UserContext = Parameters<WidgetSessionService['authorize']>[2];

/** A widget request's one file, read within the anonymous-work quotas (the route reads it; the lease is given back here once the file is processed). */
export interface ReceivedFile {
  staged: StagedBlob;
  fileName: string;
  conversationId?: string;
  customerId?: string;
  /** The identity the form's flat fields carry (external_id, user_hash). */
  identity: UserContext | undefined;
  lease: { release(): Promise<void> };
}

export interface WidgetFilesDeps {
  widget: Pick<WidgetSessionService, 'authorize' | 'identifyOnSite'>;
  blobs: Pick<BlobStore, 'discard'>;
  uploads: Pick<UploadService, 'admit' | 'store' | 'failExtraction' | 'answer' | 'conversationOf' | 'status'>;
  voiceNotes: Pick<VoiceNoteService, 'storeVoiceNote' | 'releaseVoiceNote' | 'transcriptAnswer'>;
  uploadSearch: Pick<UploadSearchService, 'fileUrl'>;
  /** The extraction and transcription workflows' clients; null in a process without a workflow service. */
  runs: () => { uploads: UploadRuns; transcriptions: TranscriptionRuns } | null;
}


/**
 * The widget's file endpoints end to end (POST /upload, GET /upload/{id}, POST /file_url,
 * POST /transcribe): the identity rules of the conversation named, the upload's or voice
 * note's storage, its workflow in the worker, and the answer. The route reads the bytes
 * (`read`), called only once the checks that need no byte have passed.
 */
export class WidgetFiles {
  constructor(private readonly deps: WidgetFilesDeps) {}

  /**
   * The identity rules of a request about a conversation (404 when it is not the site's,
   * the 403s of a verified visitor's conversation); without one, the identity alone.
   */
  private async checkIdentity(site: SiteRow, conversationId: string | undefined, ctx: UserContext | undefined): Promise<void> {
    if (conversationId) await this.deps.widget.authorize(site, conversationId, ctx);
    else if (ctx) await this.deps.widget.identifyOnSite(site, ctx);
  }

  /** POST /upload: stored, its text extracted in the worker (`widget-upload:<upload_id>`), answered once ready. */
  async upload(site: SiteRow, read: () => Promise<ReceivedFile>): Promise<UploadResult> {
    // Refused before a byte is read when the agent or its toggle does not allow uploads,
    // or when this process has no workflow service to extract on.
    await this.deps.uploads.admit(site);
    const extraction = this.deps.runs()?.uploads;
    if (!extraction) throw noWorkflowService();
    const file = await read();
    try {
      await this.checkIdentity(site, file.conversationId, file.identity).catch(async (err: unknown) => {
        await this.deps.blobs.discard(file.staged);
        // The upload contract has no not_found: a conversation_id not of this site is a bad field.
        if (err instanceof DomainError && err.code === 'not_found') throw new DomainError('invalid_request', 'conversation_id: not a conversation of this site');
        throw err;
      });
      const stored = await this.deps.uploads.store(site, { staged: file.staged, fileName: file.fileName, conversationId: file.conversationId, customerId: file.customerId });
      // Extraction runs in the worker (`widget-upload:<upload_id>`); the answer waits for it.
      const outcome = await extraction.extract(stored, async () => {
        await this.deps.uploads.failExtraction(stored.row.id, 'processing could not start; upload the file again');
      });
      return this.deps.uploads.answer(stored, outcome);
    } finally {
      await file.lease.release();
    }
  }

  /** GET /upload/{upload_id}: the upload's own conversation decides, named or not (a verified visitor's upload needs their identity). */
  async status(site: SiteRow, uploadId: string, q: { conversationId?: string; identity: UserContext | undefined }): Promise<UploadStatus> {
    const owner = await this.deps.uploads.conversationOf(site, uploadId);
    await this.checkIdentity(site, owner ?? q.conversationId, q.identity);
    return this.deps.uploads.status(site, uploadId, q.conversationId);
  }

  /** POST /file_url: a fresh link for a file of the conversation (403 forbidden, not 404, for a conversation that is not the site's). */
  async fileUrl(site: SiteRow, conversationId: string, fileKey: string, ctx: UserContext | undefined): Promise<{ url: string }> {
    await this.deps.widget.authorize(site, conversationId, ctx).catch((err: unknown) => {
      if (err instanceof DomainError && err.code === 'not_found') throw new DomainError('forbidden', 'file_key: not a file of this conversation nor a downloadable knowledge-base file');
      throw err;
    });
    return this.deps.uploadSearch.fileUrl(site, conversationId, fileKey);
  }

  /** POST /transcribe: the voice note transcribed in the worker (`transcribe:<trn_id>`), never in the API process. */
  async transcribe(site: SiteRow, read: () => Promise<ReceivedFile>): Promise<{ transcript: string }> {
    // Refused before a byte is read without a workflow service.
    const transcriptions = this.deps.runs()?.transcriptions;
    if (!transcriptions) throw noWorkflowService();
    const file = await read();
    try {
      await this.checkIdentity(site, file.conversationId, file.identity).catch(async (err: unknown) => {
        await this.deps.blobs.discard(file.staged);
        throw err;
      });
      const note = await this.deps.voiceNotes.storeVoiceNote({ staged: file.staged, fileName: file.fileName });
      const outcome = await transcriptions.transcribe(note, site, () => this.deps.voiceNotes.releaseVoiceNote(note.blobKey, note.holdId));
      return this.deps.voiceNotes.transcriptAnswer(outcome);
    } finally {
      await file.lease.release();
    }
  }
}
