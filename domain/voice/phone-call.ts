import type { Logger } from 'pino';
import { OperationalError } from '../../lib/failures';
import type { VoiceMedia } from './media';
import type { VoiceSessionService } from './sessions';
import type { CallEnd, MediaLeg, Telephony } from '../ports/voice';

export interface PhoneCallInput {
  callId: string;
  workspaceId: string;
  conversationId: string;
  /** E.164. */
  phone: string;
}

/** How a call ended: its terminal status and why (the hang-up reason, or the dial's failure). */
export interface CallOutcome {
  status: CallEnd;
  reason: string;
  error?: string;
}

/** The failure a dial reports when it ends unanswered with a status of its own (busy, no answer): domain/ports/voice.ts DialFailed. */
interface DialFailure {
  status: Exclude<CallEnd, 'completed'>;
  message: string;
}
const isDialFailure = (err: unknown): err is DialFailure =>
  err instanceof OperationalError && err.code === 'DialFailed' && typeof (err as unknown as DialFailure).status === 'string';

/**
 * One dial-out call on the worker: dials through the telephony (the row follows its
 * progress, ringing then in_progress), then runs the voice agent on the answered leg
 * until either side hangs up. The row's terminal status is written the moment the call
 * ends (so its duration is the talk time, not the recording's save): busy / no_answer /
 * failed from the dial, completed once answered. `signal` aborting hangs up (before the
 * answer: the dial is abandoned and the call is `failed`, "cancelled").
 */
export async function runPhoneCall(
  deps: { telephony: Telephony | null; media: VoiceMedia; sessions: VoiceSessionService; log: Logger },
  input: PhoneCallInput,
  signal: AbortSignal,
  heartbeat: (details: unknown) => void,
): Promise<CallOutcome> {
  const id = input.callId;
  const end = async (outcome: CallOutcome): Promise<CallOutcome> => {
    await deps.sessions.callStatus(id, outcome.status, outcome.error ? { error: outcome.error } : {});
    return outcome;
  };
  if (!deps.telephony) return end({ status: 'failed', reason: 'no_telephony', error: 'no voice provider with an outbound number is configured on this worker' });
  // Progress is reported synchronously; the row's updates run in order behind it.
  let progressed = Promise.resolve();
  const progress = (status: 'ringing' | 'in_progress') => {
    heartbeat({ phase: status });
    progressed = progressed.then(() => deps.sessions.callStatus(id, status)).catch((err) => deps.log.warn({ err, id, status }, 'call status not recorded'));
  };
  const beat = setInterval(() => heartbeat({ phase: 'dialing' }), 2000);
  let leg: MediaLeg;
  try {
    leg = await deps.telephony.dial({ callId: id, workspaceId: input.workspaceId, to: input.phone, room_name: id }, progress, signal);
  } catch (err) {
    await progressed;
    if (signal.aborted) return end({ status: 'failed', reason: 'cancelled', error: 'hung up before the call was answered' });
    if (isDialFailure(err)) return end({ status: err.status, reason: err.status, error: err.message });
    deps.log.warn({ err, id }, 'dial-out failed');
    return end({ status: 'failed', reason: 'dial_failed', error: err instanceof Error ? err.message : String(err) });
  } finally {
    clearInterval(beat);
  }
  await progressed;
  // A telephony that connects without reporting the answer still has a connected leg.
  await deps.sessions.callStatus(id, 'in_progress');
  const reason = await deps.media.converse(id, leg, { id: input.conversationId, workspaceId: input.workspaceId }, signal, heartbeat);
  return end({ status: 'completed', reason });
}
