import { ActivityFailure, ApplicationFailure, proxyActivities, setCurrentDetails, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { UploadOutcome } from '../domain/widget/uploads';
import { cancelled, recordCancelled } from './cancellation';
import { recordOutcome } from './outcome';
import { localPresets, presets } from './presets';
import { shortSteps } from './short-steps';

const { extractUpload } = proxyActivities<Activities>(presets.uploadExtraction);
/** The upload's error, a short database write: a local activity (see short-steps.ts). */
const { failUploadExtraction } = shortSteps(['failUploadExtraction'], presets.bookkeeping, localPresets.bookkeeping);

/** One workflow per widget upload; POST /upload waits for it. */
export const widgetUploadWorkflowId = (uploadId: string) => `widget-upload:${uploadId}`;

export interface WidgetUploadInput {
  uploadId: string;
  /** The extractor's kind, decided from the bytes when the upload was stored. */
  kind: string;
}

/** The reason a cancelled run leaves on the upload (status `error`). */
export const UPLOAD_CANCELLED = 'processing was cancelled by an operator; upload the file again';

/** Failure types of the extraction step (domain/widget/uploads/records.ts, lib/extract/types.ts). */
const TRANSCRIBER_CREDENTIAL_REFUSED = 'TranscriberCredentialRefused';
const TRANSCRIBER_UNAVAILABLE = 'TranscriberUnavailable';
/** A recording over TRANSCRIBE_MAX_SECONDS (lib/extract/types.ts). */
const MEDIA_TOO_LONG = 'MediaTooLong';

function outcomeOf(err: unknown): Extract<UploadOutcome, { status: 'error' }> {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return { status: 'error', failure: 'unreadable', reason: 'extraction took too long and was stopped' };
  if (cause instanceof ApplicationFailure) {
    if (cause.type === TRANSCRIBER_CREDENTIAL_REFUSED) return { status: 'error', failure: 'transcriber_credential', reason: cause.message };
    if (cause.type === TRANSCRIBER_UNAVAILABLE) return { status: 'error', failure: 'transcriber', reason: cause.message };
    if (cause.type === MEDIA_TOO_LONG) return { status: 'error', failure: 'too_long', reason: cause.message };
    // Only extraction's reasons are meant for users; anything else stays in the workflow history.
    if (cause.type === 'ExtractionError' || cause.type === 'ExtractionCrash') return { status: 'error', failure: 'unreadable', reason: cause.message };
  }
  return { status: 'error', failure: 'internal', reason: 'processing failed after retries (internal error); see the widget-upload workflow in the Temporal UI' };
}

/**
 * A visitor's upload read into text (`widget-upload:upl_…`), the extraction step of
 * knowledge-base indexing applied to an upload: processing → ready, or error with a
 * reason — whatever fails, so no upload stays processing. The worker running the step
 * may be lost: Temporal notices the missing heartbeat and another worker extracts again.
 */
export async function widgetUploadWorkflow(input: WidgetUploadInput): Promise<UploadOutcome> {
  const fail = (reason: string, summary: string) => failUploadExtraction(summary, [input.uploadId, reason]);
  try {
    setCurrentDetails(`Extracting the text (${input.kind}) in the isolated process; the visitor's POST /upload is waiting.`);
    const done = await extractUpload.executeWithOptions({ ...presets.uploadExtraction, summary: `extract text (${input.kind})` }, [input.uploadId, input.kind]);
    setCurrentDetails(done === 'ready' ? 'Ready.' : 'Already settled by an earlier run: nothing to do.');
    recordOutcome('succeeded');
    return { status: 'ready' };
  } catch (err) {
    if (cancelled(err)) {
      await recordCancelled(() => fail(UPLOAD_CANCELLED, 'record: error (cancelled)'));
      recordOutcome('cancelled');
      setCurrentDetails(`Cancelled: the upload is in error ("${UPLOAD_CANCELLED}").`);
      throw err;
    }
    const outcome = outcomeOf(err);
    const cause = err instanceof ActivityFailure && err.cause ? err.cause : err;
    setCurrentDetails(`Failed (${outcome.failure}): ${(cause as Error).message}`);
    await fail(outcome.reason, 'record: error');
    recordOutcome('failed');
    return outcome;
  }
}
