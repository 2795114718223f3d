import { DomainError } from '../errors';
import type { MessageRuns } from '../ports/workflow-runs';
import type { MessageService } from './messages';
import type { SendBody } from './plan';

export interface OutboundMessagesDeps {
  messages: Pick<MessageService, 'configured' | 'plan' | 'get'>;
  /** The `message-send` workflow's client; null in a process without a workflow service. */
  runs: () => MessageRuns | null;
}

/**
 * POST /api/v1/messages end to end: the send planned (sender, template, session window),
 * sent by its `message-send:<message_id>` workflow and waited for, and the stored
 * message as the API answers it.
 */
export class OutboundMessages {
  constructor(private readonly deps: OutboundMessagesDeps) {}

  async send(workspaceId: string, body: SendBody) {
    const runs = this.deps.runs();
    if (!runs || !this.deps.messages.configured) {
      throw new DomainError('messaging_unavailable', 'Sending is not configured on this server (MSGAPP_API_BASE and a Temporal connection are needed)');
    }
    const plan = await this.deps.messages.plan(workspaceId, body);
    const result = await runs.send(plan);
    if (result.status === 'failed') {
      throw new DomainError('provider_error', `The provider did not accept the message: ${result.error}`, { message_id: plan.messageId });
    }
    const message = await this.deps.messages.get(workspaceId, plan.messageId);
    return {
      id: message.id,
      conversation_id: message.conversation_id,
      agent_id: plan.agentId,
      channel: 'msgapp' as const,
      to: message.to,
      from: message.from,
      send_authorized: true,
      status: 'sent' as const,
      provider_message_id: result.providerMessageId,
    };
  }
}
