import { ActivityFailure, ApplicationFailure, proxyActivities, setCurrentDetails, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ChunkAnswer, ExtractionOutcome, FailureKind } from '../domain/extraction/extractions';
import { cancelled, recordCancelled } from './cancellation';
import { recordOutcome } from './outcome';
import { presets } from './presets';

const { readExtractionText } = proxyActivities<Activities>(presets.uploadExtraction);
const { answerExtractionChunk } = proxyActivities<Activities>(presets.modelCall);
const { finishExtraction, failExtraction } = proxyActivities<Activities>(presets.bookkeeping);

/** One workflow per structured extraction (`ext_…`); POST /documents/extract_structured waits for it. */
export const structuredExtractionWorkflowId = (extractionId: string) => `extract:${extractionId}`;

export interface StructuredExtractionInput {
  extractionId: string;
}

/** The reason a cancelled run leaves on the extraction. */
export const EXTRACTION_CANCELLED = 'the extraction was cancelled by an operator; send the request again';

/** Failure types of the steps (domain/extraction/extractions.ts, lib/extract/types.ts, providers/llm/model.ts). */
const UNREADABLE = new Set(['ExtractionRefused', 'ExtractionError', 'ExtractionCrash']);
const MODEL = new Set(['LlmError', 'LlmRejected']);
/** Validation against the caller's schema past its deadline, or its thread lost (domain/extraction/validate-thread.ts): 422. */
const INVALID = new Set(['ValidationTimeout', 'ValidationCrash']);

function outcomeOf(err: unknown): Extract<ExtractionOutcome, { status: 'failed' }> {
  const activity = err instanceof ActivityFailure ? err.activityType : undefined;
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const failed = (failure: FailureKind, reason: string) => ({ status: 'failed' as const, failure, reason });
  if (cause instanceof TimeoutFailure) {
    return activity === 'answerExtractionChunk' ? failed('model', 'the model did not answer in time') : failed('unreadable', 'reading the document took too long and was stopped');
  }
  if (cause instanceof ApplicationFailure) {
    if (UNREADABLE.has(cause.type ?? '')) return failed('unreadable', cause.message);
    if (MODEL.has(cause.type ?? '')) return failed('model', cause.message);
    if (INVALID.has(cause.type ?? '')) return failed('no_valid_output', cause.message);
  }
  return failed('internal', 'the extraction failed after retries (internal error); see the extract workflow in the Temporal UI');
}

/**
 * A structured extraction (`extract:ext_…`): the document's text (isolated extraction,
 * OCR for images), one model call per chunk (each constrained by the schema, with one
 * repair turn), then merge and validate. Ends succeeded or failed with a reason, whatever
 * happens, so no extraction stays running; the worker running a step may be lost, and
 * Temporal notices the missing heartbeat and runs the step again elsewhere.
 */
export async function structuredExtractionWorkflow(input: StructuredExtractionInput): Promise<ExtractionOutcome> {
  const id = input.extractionId;
  try {
    setCurrentDetails('Reading the document’s text in the isolated extraction process.');
    const { chunks } = await readExtractionText.executeWithOptions({ ...presets.uploadExtraction, summary: 'read the text' }, [id]);
    const answers: ChunkAnswer[] = [];
    // One call at a time: a local model serves one request well, not several.
    for (let i = 0; i < chunks; i++) {
      setCurrentDetails(`Asking the model about part ${i + 1} of ${chunks}.`);
      answers.push(await answerExtractionChunk.executeWithOptions({ ...presets.modelCall, summary: `model: part ${i + 1} of ${chunks}` }, [id, i]));
    }
    setCurrentDetails('Merging and validating the answers.');
    const outcome = await finishExtraction(id, answers);
    setCurrentDetails(outcome.status === 'succeeded' ? 'Succeeded.' : `Failed: ${outcome.reason}`);
    recordOutcome(outcome.status);
    return outcome;
  } catch (err) {
    if (cancelled(err)) {
      await recordCancelled(() => failExtraction(id, 'internal', EXTRACTION_CANCELLED));
      recordOutcome('cancelled');
      setCurrentDetails('Cancelled.');
      throw err;
    }
    const outcome = outcomeOf(err);
    setCurrentDetails(`Failed (${outcome.failure}): ${outcome.reason}`);
    await failExtraction(id, outcome.failure, outcome.reason);
    recordOutcome('failed');
    return outcome;
  }
}
