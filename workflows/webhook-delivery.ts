import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { presets, singleAttempt } from './presets';

export interface WebhookDeliveryInput {
  deliveryId: string;
  /** Which run of attempts this is (a retry or replay starts a new run of the same delivery). */
  run: number;
  /** The waits between attempts: five of them make six attempts (1, 2, 4, 8, 16 s by default). */
  backoffMs: number[];
  /** Time-out of one attempt. */
  timeoutMs: number;
}

export type WebhookDeliveryResult = 'delivered' | 'failed' | 'gone' | 'settled';

/**
 * One workflow per delivery (`webhook-delivery:dlv_…`). Each attempt is one activity
 * doing one POST; Temporal does not retry it (an attempt that dies with its worker
 * times out and counts as a failed attempt), the workflow owns the schedule.
 */
export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const { attemptWebhookDelivery } = proxyActivities<Activities>(singleAttempt(input.timeoutMs));
  const { recordWebhookOutcome } = proxyActivities<Activities>(presets.bookkeeping);

  const attempts = input.backoffMs.length + 1;
  let lastError: string | null = null;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await sleep(input.backoffMs[attempt - 2]);
    let result;
    try {
      result = await attemptWebhookDelivery({ deliveryId: input.deliveryId, run: input.run, attempt });
    } catch (err) {
      // The activity itself failed (worker lost, time-out): a failed attempt like any other.
      lastError = `attempt did not complete: ${(err as Error).message}`;
      continue;
    }
    if (result.outcome === 'gone' || result.outcome === 'settled') return result.outcome;
    if (result.outcome === 'delivered') {
      await recordWebhookOutcome({ deliveryId: input.deliveryId, run: input.run, delivered: true, error: null });
      return 'delivered';
    }
    lastError = result.error;
  }
  await recordWebhookOutcome({ deliveryId: input.deliveryId, run: input.run, delivered: false, error: lastError });
  return 'failed';
}
