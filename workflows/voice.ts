import { ActivityFailure, allHandlersFinished, ApplicationFailure, CancellationScope, condition, defineQuery, defineUpdate, proxyActivities, setCurrentDetails, setHandler, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RecordingView } from '../domain/voice/sessions';
import { recordOutcome, type Outcome } from './outcome';
import { presets } from './presets';
import { billVoiceMinutes } from './voice-minutes';

/** One workflow per browser voice session: `voice:vs_…`. */
export const voiceWorkflowId = (voiceSessionId: string) => `voice:${voiceSessionId}`;

export interface VoiceSessionInput {
  voiceSessionId: string;
  workspaceId: string;
  conversationId: string;
  /** Seconds each paid period lasts (default 60: a minute; tests shorten it). */
  billingPeriodSeconds?: number;
}

export interface VoiceOutcome {
  /** As `ConciergeOutcome` (absent in runs before the outcome-attribute patch). */
  outcome?: Outcome;
  reason: string;
  recordings: RecordingView[];
}

/** POST /voice/stop: ends the session and answers once its recordings are saved. */
export const stopVoiceUpdate = defineUpdate<{ ended: true; recordings: RecordingView[] }, []>('stop');
export const voiceStateQuery = defineQuery<{ phase: 'live' | 'finishing' | 'ended'; reason: string | null }>('state');

const { runVoiceSession } = proxyActivities<Activities>(presets.voiceMedia);
const { endVoiceSession, finishVoiceSession } = proxyActivities<Activities>(presets.dbWrite);
const { saveVoiceRecordings } = proxyActivities<Activities>(presets.recordingSave);

/** How long the media activity has to end by itself after a stop before it is cancelled. */
const STOP_GRACE = '10 seconds';

/**
 * A browser voice session (`voice:vs_…`): supervises the long, heartbeating media
 * activity (the agent's peer, VAD → STT → the conversation actor's turn → TTS, the
 * recorder), pays each further minute from the credit ledger (out of credits: the agent
 * says goodbye and the session ends), and, however it ended (the visitor left or
 * stopped, a lost worker, cancellation), saves the recordings made so far and closes the
 * session's row. `stop` answers with the recordings.
 */
export async function voiceSessionWorkflow(input: VoiceSessionInput): Promise<VoiceOutcome> {
  const id = input.voiceSessionId;
  let stopRequested = false;
  let finished = false;
  let phase: 'live' | 'finishing' | 'ended' = 'live';
  let reason: string | null = null;
  let recordings: RecordingView[] = [];
  setHandler(stopVoiceUpdate, async () => {
    stopRequested = true;
    await condition(() => finished);
    return { ended: true as const, recordings };
  });
  setHandler(voiceStateQuery, () => ({ phase, reason }));
  setCurrentDetails(`Voice session ${id} of conversation ${input.conversationId}: waiting for the visitor to join, then live.`);

  let mediaDone = false;
  const media = new CancellationScope();
  const mediaRun = media
    .run(() =>
      runVoiceSession.executeWithOptions({ ...presets.voiceMedia, summary: 'voice media (agent peer, VAD, STT, turn, TTS, recorder)' }, [
        { voiceSessionId: input.voiceSessionId, workspaceId: input.workspaceId, conversationId: input.conversationId },
      ]),
    )
    .then(
      (r) => r,
      (err) => lostReason(err),
    )
    .finally(() => (mediaDone = true));

  // Further minutes, paid as each begins (the first was paid at start).
  const minutes = billVoiceMinutes({ workspaceId: input.workspaceId, id, periodMs: (input.billingPeriodSeconds ?? 60) * 1000, label: `Voice session ${id}`, mediaDone: () => mediaDone });

  // A stop: tell the media to end; cancel it if it does not within the grace period.
  void (async () => {
    await condition(() => stopRequested || mediaDone);
    if (mediaDone) return;
    await endVoiceSession(id, 'stopped');
    if (!(await condition(() => mediaDone, STOP_GRACE))) media.cancel();
  })();

  reason = await mediaRun;
  phase = 'finishing';
  setCurrentDetails(`Voice session ${id} ended (${reason}); saving its recordings.`);
  await CancellationScope.nonCancellable(async () => {
    recordings = await saveVoiceRecordings.executeWithOptions({ ...presets.recordingSave, summary: 'save recordings (caller, agent, stereo)' }, [{ voiceSessionId: id }, { id: input.conversationId, workspaceId: input.workspaceId }]).catch(() => []);
    await finishVoiceSession(id, reason!);
    await minutes.settle();
  });
  phase = 'ended';
  finished = true;
  setCurrentDetails(`Voice session ${id} ended (${reason}); ${recordings.length} recordings saved.`);
  const result = { outcome: recordOutcome(voiceOutcome(reason, stopRequested)), reason, recordings };
  // A stop waiting on `finished` answers before the run closes (an update left open when a run closes fails, as not found).
  await condition(allHandlersFinished);
  return result;
}

/** A lost worker or a media failure failed the session; a cancel not asked for by a stop cancelled it; any other end (left, stopped, out of credits) is a session that ran. */
function voiceOutcome(reason: string, stopRequested: boolean): Outcome {
  if (reason === 'worker_lost' || reason.startsWith('failed')) return 'failed';
  if (reason === 'cancelled' && !stopRequested) return 'cancelled';
  return 'succeeded';
}

/** Why the media activity ended without a reason of its own. */
function lostReason(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  if (cause instanceof TimeoutFailure) return 'worker_lost';
  if (cause instanceof ApplicationFailure) return `failed: ${cause.message}`.slice(0, 200);
  return 'cancelled';
}
