import type { ActivityDeps } from './deps';

/** Webhook deliveries: the attempts and their outcome. */
export function webhookActivities(deps: ActivityDeps) {
  return {
    /** One webhook delivery attempt: one signed POST of the stored body, logged. */
    async attemptWebhookDelivery(input: { deliveryId: string; run: number; attempt: number }) {
      return deps.services.deliveries.attempt(input.deliveryId, input.run, input.attempt);
    },

    /** Settles a delivery run and updates its subscription's failure accounting. */
    async recordWebhookOutcome(input: { deliveryId: string; run: number; delivered: boolean; error: string | null }) {
      return deps.services.deliveries.recordOutcome(input.deliveryId, input.run, input.delivered, input.error);
    },

    /** Settles a run an operator cancelled: `failed` with the reason, the subscription's counter untouched. */
    async failWebhookRun(input: { deliveryId: string; run: number; reason: string }): Promise<boolean> {
      return deps.services.deliveries.failRun(input.deliveryId, input.run, input.reason);
    },
  };
}
