import type { ICall } from '../../db/entities';
import { DomainError } from '../errors';
import type { CallRuns } from '../workflow-runs';
import type { VoiceSessionService } from './sessions';

export interface DialOutDeps {
  sessions: Pick<VoiceSessionService, 'reserveCall' | 'callStatus'>;
  /** The call workflow's client; null in a process without a workflow service. */
  calls: () => CallRuns | null;
  /** The telephony provider's kind (recorded on the call), or null when this process has none. */
  telephonyKind: () => string | null;
}

/**
 * Places a checked dial-out call (POST /widget/call, POST /api/v1/outbound channel voice):
 * takes a slot and pays the first minute (429 concurrent_voice_limit_reached, 402
 * out_of_credits), then starts its `call:call_…` workflow; a call whose workflow could not
 * start is marked failed, so it holds no slot.
 */
export class DialOut {
  constructor(private readonly deps: DialOutDeps) {}

  async place(c: { workspaceId: string; siteId: string | null; conversationId: string; agentId: string; phone: string; destinationClass?: 'fixed' | 'mobile' | 'other'; creditsPerMinute?: number }): Promise<ICall> {
    const calls = this.deps.calls();
    if (!calls) throw new DomainError('workflow_unavailable', 'The workflow service is not connected to this API process');
    const row = await this.deps.sessions.reserveCall({ ...c, provider: this.deps.telephonyKind() ?? 'none' });
    try {
      await calls.startCall({ callId: row.id, workspaceId: c.workspaceId, conversationId: c.conversationId, phone: c.phone, siteId: c.siteId });
    } catch (err) {
      await this.deps.sessions.callStatus(row.id, 'failed', { error: 'the call could not be started' });
      throw err;
    }
    return row;
  }
}
