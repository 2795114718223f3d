import type { ICall } from '../../db/entities';
import { enforceDialOut, type DialOutLimits } from '../../lib/ratelimit';
import { noWorkflowService, type CallRuns } from '../ports/workflow-runs';
import type { CallService } from './calls';
import type { VoiceSessionService } from './sessions';

export interface DialOutDeps {
  sessions: Pick<VoiceSessionService, 'reserveCall' | 'callStatus'>;
  /** The API's checks of a call and the call as it shows it. */
  calls: Pick<CallService, 'prepareOutbound' | 'get'>;
  /** The call workflow's client; null in a process without a workflow service. */
  runs: () => CallRuns | null;
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
    const runs = this.deps.runs();
    if (!runs) throw noWorkflowService();
    const row = await this.deps.sessions.reserveCall({ ...c, provider: this.deps.telephonyKind() ?? 'none' });
    try {
      await runs.startCall({ callId: row.id, workspaceId: c.workspaceId, conversationId: c.conversationId, phone: c.phone, siteId: c.siteId });
    } catch (err) {
      await this.deps.sessions.callStatus(row.id, 'failed', { error: 'the call could not be started' });
      throw err;
    }
    return row;
  }

  /**
   * POST /api/v1/outbound channel voice: the agent phones `to`. Checked (the agent, its
   * toggle, the number, the prerequisites, the conversation: CallService.prepareOutbound),
   * the calls to that number across all workspaces capped once the number is accepted
   * (429 rate_limited), placed, and answered as GET /api/v1/calls/{id} shows it.
   */
  async fromApi(workspaceId: string, body: { to: string; agent_id: string; conversation_id?: string }, limits: DialOutLimits) {
    const call = await this.deps.calls.prepareOutbound(workspaceId, body, (dest) => enforceDialOut(limits, 'perDestination', dest.phone));
    const row = await this.place({ workspaceId, siteId: null, ...call });
    return this.deps.calls.get(workspaceId, row.id);
  }
}
