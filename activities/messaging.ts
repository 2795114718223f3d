import type { SendPlan } from '../domain/messaging/plan';
import type { InboundParty } from '../domain/messaging/provider-events';
import { OperationalError } from '../lib/failures';
import type { ActivityDeps } from './deps';
import { withHeartbeat } from './errors';

/** msgapp messages: the steps of the send workflow and of the inbound workflow. */
export function messagingActivities(deps: ActivityDeps) {
  return {
    async recordMessage(plan: SendPlan): Promise<void> {
      await deps.services.messages.record(plan);
    },

    /** One provider call; a rejection the provider will repeat (4xx) is a final SendFailedError (ProviderRejected). */
    async callMsgappProvider(plan: SendPlan): Promise<string> {
      return deps.services.messages.callProvider(plan);
    },

    async markMessageSent(plan: SendPlan, providerMessageId: string): Promise<void> {
      await deps.services.messages.markSent(plan, providerMessageId);
    },

    async markMessageFailed(plan: SendPlan, error: string): Promise<void> {
      await deps.services.messages.markFailed(plan, error);
    },

    /** Inbound, step 1: customer and conversation, found or created (null: the stored event is gone). */
    async resolveInboundParty(providerMessageId: string): Promise<InboundParty | null> {
      return deps.services.providerEvents.inboundParty(providerMessageId);
    },

    /** Inbound, step 2: the media, downloaded and stored (null: none); heartbeats while it downloads. */
    async downloadInboundMedia(providerMessageId: string): Promise<Record<string, unknown> | null> {
      return withHeartbeat(() => deps.services.providerEvents.downloadInboundMedia(providerMessageId));
    },

    /** Inbound, step 3b: the text of the message's media (a transcript for audio and video), for the agent; heartbeats while it reads. */
    async readInboundMedia(messageId: string): Promise<{ chars: number }> {
      return withHeartbeat(() => deps.services.providerEvents.readInboundMedia(messageId));
    },

    /**
     * Inbound, step 4: the recorded message goes to its conversation's actor, which
     * answers it, unless the number's agent does not answer (then why).
     */
    async handInboundToAgent(input: { providerMessageId: string; messageId: string; party: InboundParty }): Promise<{ answered: boolean; reason?: string }> {
      const { conversations } = deps;
      return deps.services.providerEvents.handToAgent(
        {
          customerMessage: (conv, m) => {
            if (!conversations) throw new OperationalError('NoWorkflowClient', 'this worker has no Temporal client to reach the conversation actor', true);
            return conversations.customerMessage(conv, m);
          },
        },
        input,
      );
    },

    /** Inbound, step 3: the message, its event and `message.inbound`, once. */
    async recordInboundMessage(providerMessageId: string, party: InboundParty, download: { media?: Record<string, unknown>; error?: string }) {
      return deps.services.providerEvents.recordInbound(providerMessageId, party, download);
    },
  };
}
