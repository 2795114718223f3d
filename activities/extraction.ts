import { Context } from '@temporalio/activity';
import type { ChunkAnswer, FailureKind } from '../domain/extraction/extractions';
import type { ActivityDeps } from './deps';
import { withHeartbeat } from './errors';

/** Structured extraction: the steps of the `extract:ext_…` workflow. */
export function extractionActivities(deps: ActivityDeps) {
  const structured = deps.services.structured;
  return {
    /** The document's text in the isolated extraction process; heartbeats while it runs. */
    async readExtractionText(extractionId: string): Promise<{ chunks: number }> {
      return withHeartbeat(() => structured.readText(extractionId));
    },

    /** One chunk's answer from the model (and its repair turn); a cancelled activity aborts the call. */
    async answerExtractionChunk(extractionId: string, index: number): Promise<ChunkAnswer> {
      const signal = Context.current().cancellationSignal;
      return withHeartbeat(() => structured.answerChunk(extractionId, index, signal));
    },

    async finishExtraction(extractionId: string, answers: ChunkAnswer[]) {
      return structured.finish(extractionId, answers);
    },

    async failExtraction(extractionId: string, failure: FailureKind, reason: string): Promise<void> {
      await structured.fail(extractionId, failure, reason);
    },
  };
}
