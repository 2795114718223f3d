import { patched, upsertSearchAttributes } from '@temporalio/workflow';
import { OUTCOME } from './search-attributes';

/**
 * How a run ended, for the operator: `ConciergeOutcome = 'failed'` finds every failed send, indexing, extraction,
 * upload, transcription, voice session and call in one query. A failed business outcome does not fail the run: the
 * record is settled with its reason and the caller (POST /upload, /transcribe, /documents/extract_structured,
 * /messages) reads the reason from the result, so the run completes (or ends Canceled after an operator's cancel).
 */
export type Outcome = 'succeeded' | 'failed' | 'cancelled' | 'unanswered';

/** Runs recorded before this patch never upserted the outcome: their histories replay without the command. */
export const OUTCOME_ATTRIBUTE_PATCH = 'outcome-attribute';

/** Upserts `ConciergeOutcome` (behind OUTCOME_ATTRIBUTE_PATCH); returns the outcome, to put in the result. */
export function recordOutcome<O extends Outcome>(outcome: O): O {
  if (patched(OUTCOME_ATTRIBUTE_PATCH)) upsertSearchAttributes([{ key: OUTCOME, value: outcome }]);
  return outcome;
}
