import { Context } from '@temporalio/activity';
import { ExtractionError } from '../lib/extract';
import type { ActivityDeps } from './deps';
import { withHeartbeat } from './errors';

/** Knowledge-base indexing: one file version from pending to active or error. */
export function kbActivities(deps: ActivityDeps) {
  return {
    async beginIndexing(fileId: string) {
      return deps.indexing.begin(fileId);
    },

    /**
     * Extracts (in an isolated child process), chunks and stores the passages, replacing
     * any earlier set. An ExtractionError says itself whether a retry may help (a process
     * that died or never started, a busy transcription server: ExtractionCrash).
     */
    async extractAndChunkFile(fileId: string): Promise<number> {
      try {
        return await withHeartbeat(() => deps.indexing.extractAndChunk(fileId));
      } catch (err) {
        if (err instanceof ExtractionError && err.retryable) {
          Context.current().log.warn('extraction failed for a reason that says nothing about the document; retrying', {
            reason: err.reason,
            detail: String(err.detail ?? '').slice(0, 2000),
          });
        }
        throw err;
      }
    },

    async embedFileChunks(fileId: string): Promise<number> {
      return deps.indexing.embed(fileId, (done) => Context.current().heartbeat(done));
    },

    async finishIndexing(fileId: string) {
      return deps.indexing.finish(fileId);
    },

    async failIndexing(fileId: string, reason: string): Promise<void> {
      await deps.indexing.fail(fileId, reason);
    },
  };
}
