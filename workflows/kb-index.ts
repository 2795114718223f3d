import { ActivityFailure, ApplicationFailure, proxyActivities, setCurrentDetails, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { cancelled, recordCancelled } from './cancellation';
import { recordOutcome } from './outcome';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';

export interface KbIndexInput {
  fileId: string;
}

/** Where the file ended: `active`, `error`, `gone` (deleted before indexing began), `settled` (an earlier run finished it). */
export type KbIndexStatus = 'active' | 'error' | 'gone' | 'settled';
/**
 * The run's result: the status, the outcome (as `ConciergeOutcome`) and, when it failed, the reason left on the
 * file. Runs before the outcome-attribute patch returned the bare status.
 */
export type KbIndexResult = { status: Exclude<KbIndexStatus, 'error'>; outcome: 'succeeded' } | { status: 'error'; outcome: 'failed'; reason: string };

/** The file's status from a run's result, either shape. */
export const kbIndexStatus = (r: KbIndexResult | KbIndexStatus): KbIndexStatus => (typeof r === 'string' ? r : r.status);

/** The text finishIndexing leaves on a file it could read no text from (domain/kb/indexing.ts). */
const NO_TEXT = 'no text could be extracted';

const { extractAndChunkFile } = proxyActivities<Activities>(presets.longExtraction);
const { embedFileChunks } = proxyActivities<Activities>(presets.embedding);
/** The file's status, short database writes: local activities (see short-steps.ts). */
const { beginIndexing, finishIndexing, failIndexing } = shortSteps(['beginIndexing', 'finishIndexing', 'failIndexing'], presets.bookkeeping, localPresets.bookkeeping);

/** The reason a cancelled run leaves on the file (`error_message`); re-uploading the file indexes it again. */
export const INDEXING_CANCELLED = 'indexing was cancelled by an operator; upload the file again to index it';

function reasonOf(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return 'indexing took too long and was stopped';
  // Only extraction's reasons (final or not, a recording over TRANSCRIBE_MAX_SECONDS included) are meant for users; anything else stays in the workflow history.
  if (cause instanceof ApplicationFailure && (cause.type === 'ExtractionError' || cause.type === 'ExtractionCrash' || cause.type === 'MediaTooLong')) return cause.message;
  return 'indexing failed after retries (internal error); see the kb-index workflow in the Temporal UI';
}

/** What the operator reads in the UI: the failure as it happened (type, message), not only the user-facing reason. */
function detailOf(err: unknown): string {
  const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
  const type = cause instanceof ApplicationFailure && cause.type ? `${cause.type}: ` : '';
  return `${type}${(cause as Error).message}`;
}

/**
 * Indexes one file version (`kb-index:file_…`): pending → processing → active | error.
 * Every step is an idempotent activity; whatever fails — extraction, embedding, a
 * time-out, a cancel — ends in `error` with a reason, so no file stays in `processing`.
 */
export async function kbIndexWorkflow(input: KbIndexInput): Promise<KbIndexResult> {
  const { fileId } = input;
  const begun = await beginIndexing('record: processing', [fileId]);
  if (begun !== 'go') {
    setCurrentDetails(begun === 'gone' ? 'The file was deleted before indexing began.' : 'The file was already indexed (active or error): nothing to do.');
    return { status: begun, outcome: recordOutcome('succeeded') };
  }
  try {
    setCurrentDetails('Extracting the text and cutting it into passages.');
    const passages = await extractAndChunkFile.executeWithOptions({ ...presets.longExtraction, summary: 'extract and chunk (isolated process)' }, [fileId]);
    setCurrentDetails(`Embedding ${passages} passages.`);
    await embedFileChunks.executeWithOptions({ ...presets.embedding, summary: `embed ${passages} passages` }, [fileId]);
    const status = await finishIndexing('record: active', [fileId]);
    setCurrentDetails(status === 'active' ? `Indexed: ${passages} passages.` : 'No text could be extracted: the file is in error.');
    return status === 'error' ? { status, outcome: recordOutcome('failed'), reason: NO_TEXT } : { status, outcome: recordOutcome('succeeded') };
  } catch (err) {
    if (cancelled(err)) {
      await recordCancelled(() => failIndexing('record: error (cancelled)', [fileId, INDEXING_CANCELLED]));
      recordOutcome('cancelled');
      setCurrentDetails(`Cancelled: the file is in error ("${INDEXING_CANCELLED}").`);
      throw err;
    }
    const reason = reasonOf(err);
    setCurrentDetails(`Failed: ${detailOf(err)}\n\nThe file is in error ("${reason}"). Uploading it again indexes it again.`);
    await failIndexing('record: error', [fileId, reason]);
    return { status: 'error', outcome: recordOutcome('failed'), reason };
  }
}

/** A file's indexing workflow: one per file id. */
export const indexWorkflowId = (fileId: string) => `kb-index:${fileId}`;
