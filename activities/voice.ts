import { Context } from '@temporalio/activity';
import { ApiError } from '../core/errors';
import type { RecordingView } from '../core/voice/sessions';
import type { ActivityDeps } from './deps';

/** The steps of the `voice:` and `call:` workflows. */
export function voiceActivities(deps: ActivityDeps) {
  const voice = () => {
    if (!deps.voice) throw new Error('voice is not configured in this worker');
    return deps.voice;
  };
  return {
    /** The live session (see core/voice/media.ts): heartbeats every 2 s; the reason it ended. */
    async runVoiceSession(input: { voiceSessionId: string; workspaceId: string; conversationId: string }): Promise<string> {
      const ctx = Context.current();
      return voice().media.runSession(input, ctx.cancellationSignal, (d) => ctx.heartbeat(d));
    },

    /** Pays minute `n` of a session or call; false when the workspace is out of credits. */
    async payVoiceMinute(workspaceId: string, id: string, n: number): Promise<boolean> {
      try {
        await voice().sessions.payMinute(workspaceId, id, n);
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.code === 'out_of_credits') return false;
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
