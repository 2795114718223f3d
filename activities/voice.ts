import { Context } from '@temporalio/activity';
import { DomainError } from '../domain/errors';
import type { RecordingView } from '../domain/voice/sessions';
import { runPhoneCall, type CallOutcome, type PhoneCallInput } from '../domain/voice/phone-call';
import type { CallEnd } from '../domain/ports/voice';
import type { ActivityDeps } from './deps';

/** The steps of the `voice:` and `call:` workflows. */
export function voiceActivities(deps: ActivityDeps) {
  const voice = () => {
    if (!deps.voice) throw new Error('voice is not configured in this worker');
    return deps.voice;
  };
  return {
    /** The live session (see domain/voice/media.ts): heartbeats every 2 s; the reason it ended. */
    async runVoiceSession(input: { voiceSessionId: string; workspaceId: string; conversationId: string }): Promise<string> {
      const ctx = Context.current();
      return voice().media.runSession(input, ctx.cancellationSignal, (d) => ctx.heartbeat(d));
    },

    /**
     * A dial-out call (see domain/voice/phone-call.ts): the dial, then the agent on the
     * answered leg; heartbeats every 2 s; cancelled: hangs up. Its outcome, with the
     * call's row already in its terminal status.
     */
    async runCall(input: PhoneCallInput): Promise<CallOutcome> {
      const ctx = Context.current();
      const v = voice();
      return runPhoneCall({ telephony: v.telephony, media: v.media, sessions: v.sessions, log: v.log, screening: v.screening }, input, ctx.cancellationSignal, (d) => ctx.heartbeat(d));
    },

    /**
     * Settles a call's terminal status (a no-op when the call activity wrote it): the
     * given one, else completed when it was answered and failed when not. The status it has.
     */
    async finishCall(id: string, end: { status?: CallEnd; error?: string }): Promise<CallEnd> {
      const sessions = voice().sessions;
      const row = await sessions.callById(id);
      if (!row) throw new Error(`no call ${id}`);
      const status = end.status ?? (row.answeredAt ? 'completed' : 'failed');
      await sessions.callStatus(id, status, end.error ? { error: end.error } : {});
      const after = await sessions.callById(id);
      return after!.status as CallEnd;
    },

    /** Pays minute `n` of a session or call; false when the workspace is out of credits. */
    async payVoiceMinute(workspaceId: string, id: string, n: number): Promise<boolean> {
      try {
        await voice().sessions.payMinute(workspaceId, id, n);
        return true;
      } catch (err) {
        if (err instanceof DomainError && err.code === 'out_of_credits') return false;
        throw err;
      }
    },

    /** Asks the live media to end (politely: a goodbye for out_of_credits). */
    async endVoiceSession(id: string, reason: string): Promise<void> {
      await voice().sessions.control(id, { k: 'end', reason });
    },

    async saveVoiceRecordings(owner: { voiceSessionId?: string; callId?: string }, conv: { id: string; workspaceId: string }): Promise<RecordingView[]> {
      return voice().media.finish(owner, conv);
    },

    async finishVoiceSession(id: string, reason: string): Promise<void> {
      await voice().sessions.markEnded(id, reason, reason.startsWith('failed'));
    },
  };
}
