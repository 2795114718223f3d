import { ActivityFailure, ApplicationFailure, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets } from './presets';

export interface KbIndexInput {
  fileId: string;
}

export type KbIndexResult = 'active' | 'error' | 'gone' | 'settled';

const { extractAndChunkFile } = proxyActivities<Activities>(presets.longExtraction);
const { embedFileChunks } = proxyActivities<Activities>(presets.embedding);
const { beginIndexing, finishIndexing, failIndexing } = proxyActivities<Activities>(presets.bookkeeping);

function reasonOf(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return 'indexing took too long and was stopped';
  // Only extraction's reasons (final or not) are meant for users; anything else stays in the workflow history.
  if (cause instanceof ApplicationFailure && (cause.type === 'ExtractionError' || cause.type === 'ExtractionCrash')) return cause.message;
  return 'indexing failed after retries (internal error); see the kb-index workflow in the Temporal UI';
}

/**
 * Indexes one file version (`kb-index:file_…`): pending → processing → active | error.
 * Every step is an idempotent activity; whatever fails — extraction, embedding, a
 * time-out — ends in `error` with a reason, so no file stays in `processing`.
 */
export async function kbIndexWorkflow(input: KbIndexInput): Promise<KbIndexResult> {
  const begun = await beginIndexing(input.fileId);
  if (begun !== 'go') return begun;
  try {
    await extractAndChunkFile(input.fileId);
    await embedFileChunks(input.fileId);
    return await finishIndexing(input.fileId);
  } catch (err) {
    await failIndexing(input.fileId, reasonOf(err));
    return 'error';
  }
}
