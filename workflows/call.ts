import { ActivityCancellationType, ActivityFailure, ApplicationFailure, CancellationScope, defineQuery, proxyActivities, setCurrentDetails, setHandler, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CallOutcome, PhoneCallInput } from '../domain/voice/phone-call';
import type { RecordingView } from '../domain/voice/sessions';
import { recordOutcome, type Outcome } from './outcome';
import { presets } from './presets';
import { billVoiceMinutes } from './voice-minutes';

/** One workflow per dial-out call: `call:call_…`. */
export const callWorkflowId = (callId: string) => `call:${callId}`;

export type CallInput = PhoneCallInput;

export interface CallResult {
  /** As `ConciergeOutcome` (absent in runs before the outcome-attribute patch). */
  outcome?: Outcome;
  status: CallOutcome['status'];
  reason: string;
  recordings: RecordingView[];
}

export const callStateQuery = defineQuery<{ phase: 'live' | 'finishing' | 'ended'; status: CallOutcome['status'] | null }>('state');

const { runCall } = proxyActivities<Activities>(presets.voiceMedia);
const { finishCall } = proxyActivities<Activities>(presets.dbWrite);
const { saveVoiceRecordings } = proxyActivities<Activities>(presets.recordingSave);

/**
 * A dial-out call (`call:call_…`, `calling → ringing → in_progress → completed | failed |
 * no_answer | busy`): supervises the heartbeating call activity (the dial through the
 * configured telephony, then the voice agent on the answered leg), pays each further
 * minute from the credit ledger (out of credits: the agent says goodbye and hangs up),
 * and however it ended (either side hung up, the dial failed, a lost worker, the
 * workflow cancelled: that hangs up) closes the call's row and saves the recordings.
 */
export async function callWorkflow(input: CallInput): Promise<CallResult> {
  const id = input.callId;
  let phase: 'live' | 'finishing' | 'ended' = 'live';
  let status: CallOutcome['status'] | null = null;
  setHandler(callStateQuery, () => ({ phase, status }));
  setCurrentDetails(`Call ${id} to ${input.phone} (conversation ${input.conversationId}): dialing, then live.`);

  let mediaDone = false;
  // Cancelling the workflow cancels the call activity and waits for it: it hangs up and
  // spools its last audio before the recordings are saved.
  const media = runCall
    .executeWithOptions({ ...presets.voiceMedia, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED, summary: 'dial, then the voice agent on the call' }, [input])
    .then(
      (r) => r,
      (err) => lostCall(err),
    )
    .finally(() => (mediaDone = true));

  // Further minutes, paid as each begins (the first was paid when the call was placed).
  const minutes = billVoiceMinutes({ workspaceId: input.workspaceId, id, periodMs: 60_000, label: `Call ${id}`, mediaDone: () => mediaDone });

  const outcome = await media;
  phase = 'finishing';
  let recordings: RecordingView[] = [];
  await CancellationScope.nonCancellable(async () => {
    // The activity wrote the terminal status unless its worker was lost: this settles it then.
    status = await finishCall(id, { status: outcome.status, error: outcome.error });
    setCurrentDetails(`Call ${id} ended (${status}, ${outcome.reason}); saving its recordings.`);
    recordings = await saveVoiceRecordings
      .executeWithOptions({ ...presets.recordingSave, summary: 'save recordings (caller, agent, stereo)' }, [{ callId: id }, { id: input.conversationId, workspaceId: input.workspaceId }])
      .catch(() => []);
    await minutes.settle();
  });
  phase = 'ended';
  setCurrentDetails(`Call ${id} ended (${status}, ${outcome.reason}); ${recordings.length} recordings saved.`);
  return { outcome: recordOutcome(callOutcome(status!, outcome.reason)), status: status!, reason: outcome.reason, recordings };
}

/** Hung up by a cancel: cancelled; the dial or the worker failed: failed; busy or no answer: nobody was reached (`unanswered`), which is not the service failing. */
function callOutcome(status: CallOutcome['status'], reason: string): Outcome {
  if (reason === 'cancelled') return 'cancelled';
  if (status === 'failed') return 'failed';
  return status === 'completed' ? 'succeeded' : 'unanswered';
}

/** The call activity ended without an outcome of its own: the status is decided from the row (answered: completed). */
function lostCall(err: unknown): { status?: CallOutcome['status']; reason: string; error?: string } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return { reason: 'worker_lost', error: 'the worker running the call was lost' };
  if (cause instanceof ApplicationFailure) return { reason: 'failed', error: cause.message.slice(0, 200) };
  return { reason: 'cancelled' };
}
