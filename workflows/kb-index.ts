import { ActivityFailure, ApplicationFailure, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';

export interface KbIndexInput {
  fileId: string;
}

export type KbIndexResult = 'active' | 'error' | 'gone' | 'settled';

/** Extraction runs in a child process with its own limits; these bound the whole step, retries included. */
const { extractAndChunkFile } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  scheduleToCloseTimeout: '40 minutes',
  // The activity heartbeats every 5 s while the extraction process runs: a lost worker is noticed within 20 s.
  heartbeatTimeout: '20 seconds',
  retry: { maximumAttempts: 3, initialInterval: '2 seconds', nonRetryableErrorTypes: ['ExtractionError'] },
});
const { embedFileChunks } = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  scheduleToCloseTimeout: '90 minutes',
  // Heartbeats after every batch of 32 passages (well under a second each).
  heartbeatTimeout: '30 seconds',
  retry: { maximumAttempts: 3, initialInterval: '2 seconds' },
});
const { beginIndexing, finishIndexing, failIndexing } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

function reasonOf(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return 'indexing took too long and was stopped';
  // Only extraction's reasons are meant for users; anything else stays in the workflow history.
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
