import type { SendPlan } from '../core/messages/plan';
import type { ActivityDeps } from './deps';

/** Outbound msgapp messages: the steps of the send workflow. */
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
  };
}
