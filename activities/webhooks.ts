import { ApplicationFailure } from '@temporalio/common';
import type { ActivityDeps } from './deps';
import { WEBHOOK_HTTP_ERROR, WEBHOOK_TRANSPORT_ERROR, type WebhookAttemptFailure } from '../workflows/webhook-delivery';

/** How much of the receiver's answer a failed attempt's failure carries (the delivery log keeps 1 KB). */
const BODY_START = 256;

/** Webhook deliveries: the attempts and their outcome. */
export function webhookActivities(deps: ActivityDeps) {
  return {
    /**
     * One webhook delivery attempt: one signed POST of the stored body, logged. `failAsError` (runs since
     * WEBHOOK_WAITS_PATCH): a non-2xx answer or a transport error fails the activity, with the status and the start
     * of the answer in the failure, so the history and the UI show a failed attempt as failed; never retried here
     * (the workflow owns the schedule). Without it (runs begun before the patch) the failure is a result, as then.
     */
    async attemptWebhookDelivery(input: { deliveryId: string; run: number; attempt: number; failAsError?: boolean }) {
      const result = await deps.services.deliveries.attempt(input.deliveryId, input.run, input.attempt);
      if (!input.failAsError || result.outcome !== 'failed_attempt') return result;
      const details: WebhookAttemptFailure = { statusCode: result.statusCode, error: result.error ?? `HTTP ${result.statusCode}`, responseBody: result.responseBody?.slice(0, BODY_START) ?? null };
      const answered = result.statusCode > 0;
      throw ApplicationFailure.create({
        type: answered ? WEBHOOK_HTTP_ERROR : WEBHOOK_TRANSPORT_ERROR,
        message: answered ? `${details.error}: ${details.responseBody ?? '(no body)'}` : details.error,
        details: [details],
        nonRetryable: true,
      });
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
