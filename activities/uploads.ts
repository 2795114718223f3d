import { Context } from '@temporalio/activity';
import { ExtractionError } from '../lib/extract';
import type { ActivityDeps } from './deps';
import { withHeartbeat } from './errors';

/** Widget uploads and voice notes: the steps of the `widget-upload` and `transcribe` workflows. */
export function uploadActivities(deps: ActivityDeps) {
  return {
    /**
     * Extracts a processing upload's text (in the isolated extraction process) and marks
     * it ready. Heartbeats while the process runs, as knowledge-base extraction does.
     */
    async extractUpload(uploadId: string, kind: string): Promise<'ready' | 'settled'> {
      try {
        return await withHeartbeat(() => deps.services.uploads.extractStored(uploadId, kind));
      } catch (err) {
        if (err instanceof ExtractionError && err.retryable) {
          Context.current().log.warn('upload extraction failed for a reason that says nothing about the document; retrying', {
            reason: err.reason,
            detail: String(err.detail ?? '').slice(0, 2000),
          });
        }
        throw err;
      }
    },

    async failUploadExtraction(uploadId: string, reason: string): Promise<void> {
      await deps.services.uploads.failExtraction(uploadId, reason);
    },

    /**
     * A voice note's transcript (the `transcribe` workflow), in this worker: empty for a
     * recording without speech. Heartbeats while it runs; a cancelled activity stops the
     * transcription (the embedded one ends its thread). `workspaceId`: the note's turn in the
     * anonymous lane (absent in workflows started before it was passed).
     */
    async transcribeVoiceNote(blobKey: string, mime: string, workspaceId?: string): Promise<string> {
      const { cancellationSignal } = Context.current();
      return withHeartbeat(() => deps.services.voiceNotes.transcribeStored(blobKey, mime, cancellationSignal, workspaceId));
    },

    /** Drops a voice note's hold once transcribed, and its bytes unless another owner has the same ones (domain/storage/blob-refs.ts). */
    async releaseVoiceNote(blobKey: string, holdId?: string): Promise<void> {
      await deps.services.voiceNotes.releaseVoiceNote(blobKey, holdId);
    },
  };
}
