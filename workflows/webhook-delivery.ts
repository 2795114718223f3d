import { proxyActivities, setCurrentDetails, sleep, upsertSearchAttributes } from '@temporalio/workflow';
import { shortSteps } from './short-steps';
import { ATTEMPT, DELIVERY_STATUS } from './search-attributes';
import type { Activities } from '../activities';
import { cancelled, recordCancelled } from './cancellation';
import { localPresets, presets, singleAttempt } from './presets';

/** A delivery's retry workflow: one per delivery id (a new run of attempts after a retry reuses it once the last closed). */
export const deliveryWorkflowId = (deliveryId: string) => `webhook-delivery:${deliveryId}`;

/** The error a cancelled run leaves on its delivery (status `failed`); POST …/retry starts a new run. */
export const DELIVERY_CANCELLED = 'the delivery was cancelled by an operator; POST …/retry delivers it again';

export interface WebhookDeliveryInput {
  deliveryId: string;
  /** Which run of attempts this is (a retry or replay starts a new run of the same delivery). */
  run: number;
  /** The waits between attempts: five of them make six attempts (1, 2, 4, 8, 16 s by default). */
  backoffMs: number[];
  /** Time-out of one attempt. */
  timeoutMs: number;
  /**
   * The attempt this workflow starts with: 2 when the outbox dispatcher made attempt 1 and
   * it failed (the workflow then waits the first backoff), 1 (the default) otherwise.
   */
  firstAttempt?: number;
  /** The failed attempt 1's error, when the dispatcher made it. */
  previousError?: string | null;
}

export type WebhookDeliveryResult = 'delivered' | 'failed' | 'gone' | 'settled';

/**
 * The retry workflow of one delivery (`webhook-delivery:dlv_…`), started when the outbox
 * dispatcher's first attempt failed (worker/webhook-outbox.ts), so it begins at attempt 2.
 * Each attempt is one activity doing one POST; Temporal does not retry it (an attempt
 * that dies with its worker times out and counts as a failed attempt), the workflow owns
 * the schedule.
 */
export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  try {
    return await deliver(input);
  } catch (err) {
    if (!cancelled(err)) throw err;
    // Cancelled (an operator, during an attempt or a wait): the run ends `failed` with the reason, outside the
    // subscription's failure accounting, so the log never shows it pending for ever and a retry works.
    const { failWebhookRun } = shortSteps(['failWebhookRun'], presets.bookkeeping, localPresets.bookkeeping);
    await recordCancelled(() => failWebhookRun('record: failed (cancelled)', [{ deliveryId: input.deliveryId, run: input.run, reason: DELIVERY_CANCELLED }]));
    upsertSearchAttributes([{ key: DELIVERY_STATUS, value: 'failed' }]);
    setCurrentDetails(`Cancelled: ${DELIVERY_CANCELLED}.`);
    throw err;
  }
}

async function deliver(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const { attemptWebhookDelivery } = proxyActivities<Activities>(singleAttempt(input.timeoutMs));
  // The outcome is a short database step: a local activity since the local-db-steps patch.
  const { recordWebhookOutcome } = shortSteps(['recordWebhookOutcome'], presets.bookkeeping, localPresets.bookkeeping);

  const attempts = input.backoffMs.length + 1;
  // What an operator sees in the UI and can filter by: the status and attempt as search attributes, the last
  // error and the next attempt's time as the workflow's current details.
  const status = (value: 'attempting' | 'retrying' | 'delivered' | 'failed', attempt: number) =>
    upsertSearchAttributes([
      { key: DELIVERY_STATUS, value },
      { key: ATTEMPT, value: attempt },
    ]);
  let lastError: string | null = input.previousError ?? null;
  for (let attempt = input.firstAttempt ?? 1; attempt <= attempts; attempt++) {
    if (attempt > 1) {
      const waitMs = input.backoffMs[attempt - 2];
      status('retrying', attempt);
      setCurrentDetails(`Attempt ${attempt - 1}/${attempts} failed: ${lastError}\n\nNext attempt (${attempt}/${attempts}) at ${new Date(Date.now() + waitMs).toISOString()}.`);
      await sleep(waitMs, { summary: `backoff before attempt ${attempt}/${attempts}` });
    }
    status('attempting', attempt);
    let result;
    try {
      result = await attemptWebhookDelivery.executeWithOptions({ ...singleAttempt(input.timeoutMs), summary: `POST, attempt ${attempt}/${attempts}` }, [
        { deliveryId: input.deliveryId, run: input.run, attempt },
      ]);
    } catch (err) {
      if (cancelled(err)) throw err;
      // The activity itself failed (worker lost, time-out): a failed attempt like any other.
      lastError = `attempt did not complete: ${(err as Error).message}`;
      continue;
    }
    if (result.outcome === 'gone' || result.outcome === 'settled') return result.outcome;
    if (result.outcome === 'delivered') {
      await recordWebhookOutcome('record: delivered', [{ deliveryId: input.deliveryId, run: input.run, delivered: true, error: null }]);
      status('delivered', attempt);
      setCurrentDetails(`Delivered on attempt ${attempt}/${attempts}.`);
      return 'delivered';
    }
    lastError = result.error;
  }
  await recordWebhookOutcome('record: failed after every attempt', [{ deliveryId: input.deliveryId, run: input.run, delivered: false, error: lastError }]);
  // Exhausted: findable as ConciergeDeliveryStatus = 'failed' without reading results (the API's retry starts a new run).
  status('failed', attempts);
  setCurrentDetails(`Failed after ${attempts} attempts. Last error: ${lastError}\n\nPOST /api/v1/webhook-subscriptions/{id}/deliveries/{delivery_id}/retry starts a new run.`);
  return 'failed';
}
