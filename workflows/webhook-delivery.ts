import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  defineSignal,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { shortSteps } from './short-steps';
import { ATTEMPT, DELIVERY_STATUS, LAST_ERROR } from './search-attributes';
import type { Activities } from '../activities';
import { cancelled, recordCancelled } from './cancellation';
import { localPresets, presets, singleAttempt } from './presets';

/** A delivery's retry workflow: one per delivery id (a new run of attempts after a retry reuses it once the last closed). */
export const deliveryWorkflowId = (deliveryId: string) => `webhook-delivery:${deliveryId}`;

/** The error a cancelled run leaves on its delivery (status `failed`); POST …/retry starts a new run. */
export const DELIVERY_CANCELLED = 'the delivery was cancelled by an operator; POST …/retry delivers it again';

/**
 * The patch that made the workflow the one truth of a delivery in Temporal (issue 28):
 * an exhausted run stays open, `failed`, until the API's retry or replay (whose attempt 1
 * the outbox dispatcher makes and reports with `deliveryRunSignal`), so no closed run says
 * `failed` unless the delivery is failed now; a cancelled run ends `cancelled`; a failed
 * POST is a failed activity (`WebhookHttpError`, `WebhookTransportError`); the backoff wait
 * can be skipped (`retryNowSignal`); `ConciergeAttempt` counts the attempts made.
 * Runs begun before it replay the old branch (`deliverBeforeWaits`).
 */
export const WEBHOOK_WAITS_PATCH = 'webhook-failed-waits';

/** Failure types of an attempt that got an answer other than 2xx, or none. */
export const WEBHOOK_HTTP_ERROR = 'WebhookHttpError';
export const WEBHOOK_TRANSPORT_ERROR = 'WebhookTransportError';

/** What a failed attempt's `ApplicationFailure` carries as its first detail. */
export interface WebhookAttemptFailure {
  /** The receiver's status; 0 when it never answered. */
  statusCode: number;
  /** The error as the delivery log records it (`HTTP 500`, `timeout: …`). */
  error: string;
  /** The start of the receiver's answer. */
  responseBody: string | null;
}

/**
 * Attempt 1 of a new run of this delivery (the API's retry or replay), made by the outbox
 * dispatcher: `delivered`, `failed` (this run continues at attempt 2), or `none` (the
 * dispatcher makes no attempts itself: this run makes them all).
 */
export interface NewRun {
  run: number;
  outcome: 'delivered' | 'failed' | 'none';
  error: string | null;
}
export const deliveryRunSignal = defineSignal<[NewRun]>('deliveryRun');
/** Skips the backoff wait under way (POST …/deliveries/{delivery_id}/retry-now): the next attempt is made at once. */
export const retryNowSignal = defineSignal('retryNow');

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

type Status = 'attempting' | 'retrying' | 'delivered' | 'failed' | 'cancelled';

/** The run's state the signals write: a new run reported by the dispatcher, a skip of the wait. */
class DeliveryState {
  next: NewRun | null = null;
  skipWait = false;
  constructor(public run: number) {}
  newRun = (r: NewRun): void => {
    // Only a later run counts (a signal-with-start that started this very run repeats its own).
    if (r.run > this.run && (!this.next || r.run > this.next.run)) this.next = r;
  };
  retryNow = (): void => {
    this.skipWait = true;
  };
}

/**
 * The retry workflow of one delivery (`webhook-delivery:dlv_…`), started when the outbox
 * dispatcher's first attempt failed (worker/webhook-outbox.ts), so it begins at attempt 2.
 * Each attempt is one activity doing one POST; Temporal does not retry it (an attempt
 * that dies with its worker times out and counts as a failed attempt), the workflow owns
 * the schedule. Since WEBHOOK_WAITS_PATCH an exhausted run waits (open, `failed`) for the
 * API's retry or replay, and carries on with that run.
 */
export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const state = new DeliveryState(input.run);
  setHandler(deliveryRunSignal, state.newRun);
  setHandler(retryNowSignal, state.retryNow);
  const waits = patched(WEBHOOK_WAITS_PATCH);
  try {
    return waits ? await deliver(input, state) : await deliverBeforeWaits(input);
  } catch (err) {
    if (!cancelled(err)) throw err;
    // Cancelled (an operator, during an attempt or a wait): the run ends `failed` with the reason, outside the
    // subscription's failure accounting, so the log never shows it pending for ever and a retry works. Temporal
    // says `cancelled` (since the patch), so the `failed` view lists only deliveries whose attempts all failed.
    const { failWebhookRun } = shortSteps(['failWebhookRun'], presets.bookkeeping, localPresets.bookkeeping);
    await recordCancelled(() => failWebhookRun('record: failed (cancelled)', [{ deliveryId: input.deliveryId, run: state.run, reason: DELIVERY_CANCELLED }]));
    upsertSearchAttributes([{ key: DELIVERY_STATUS, value: waits ? 'cancelled' : 'failed' }]);
    setCurrentDetails(`Cancelled: ${DELIVERY_CANCELLED}.`);
    throw err;
  }
}

/** A failed attempt's failure as the activity raised it, or null for anything else (a time-out, a lost worker). */
function attemptFailure(err: unknown): WebhookAttemptFailure | null {
  const cause = err instanceof ActivityFailure ? err.cause : null;
  if (!(cause instanceof ApplicationFailure) || (cause.type !== WEBHOOK_HTTP_ERROR && cause.type !== WEBHOOK_TRANSPORT_ERROR)) return null;
  return (cause.details?.[0] as WebhookAttemptFailure | undefined) ?? { statusCode: 0, error: cause.message, responseBody: null };
}

/** An error's kind for LAST_ERROR: `HTTP 500`, or what comes before the first colon (`timeout`, `connect`), 100 characters at most. */
const errorKind = (error: string): string => error.split(':')[0].slice(0, 100);

const errorOf = (err: unknown): string => attemptFailure(err)?.error ?? `attempt did not complete: ${(err as Error).message}`;

/** The runs of attempts of one delivery, since WEBHOOK_WAITS_PATCH. */
async function deliver(input: WebhookDeliveryInput, state: DeliveryState): Promise<WebhookDeliveryResult> {
  const { attemptWebhookDelivery } = proxyActivities<Activities>(singleAttempt(input.timeoutMs));
  const { recordWebhookOutcome } = shortSteps(['recordWebhookOutcome'], presets.bookkeeping, localPresets.bookkeeping);
  const attempts = input.backoffMs.length + 1;
  // What an operator sees in the UI and can filter by: the status and the attempts made as search attributes, the
  // last error and the next attempt's time as the workflow's current details.
  const status = (value: Status, made?: number, error?: string | null) =>
    upsertSearchAttributes([
      { key: DELIVERY_STATUS, value },
      ...(made === undefined ? [] : [{ key: ATTEMPT, value: made }]),
      ...(error ? [{ key: LAST_ERROR, value: errorKind(error) }] : []),
    ]);
  let first = input.firstAttempt ?? 1;
  let lastError: string | null = input.previousError ?? null;
  for (;;) {
    const run = state.run;
    let attempt = first;
    for (; attempt <= attempts; attempt++) {
      if (attempt > 1) {
        const waitMs = input.backoffMs[attempt - 2];
        status('retrying', attempt - 1, lastError);
        setCurrentDetails(
          `Run ${run}: attempt ${attempt - 1}/${attempts} failed: ${lastError}\n\nNext attempt (${attempt}/${attempts}) at ${new Date(Date.now() + waitMs).toISOString()}` +
            ` (POST …/deliveries/{delivery_id}/retry-now makes it at once).`,
        );
        // Waits the backoff, or less when POST …/retry-now signals.
        await condition(() => state.skipWait, waitMs, { summary: `backoff before attempt ${attempt}/${attempts}` });
        state.skipWait = false;
      }
      status('attempting');
      try {
        const result = await attemptWebhookDelivery.executeWithOptions({ ...singleAttempt(input.timeoutMs), summary: `POST, attempt ${attempt}/${attempts}` }, [
          { deliveryId: input.deliveryId, run, attempt, failAsError: true },
        ]);
        if (result.outcome === 'gone' || result.outcome === 'settled') return result.outcome;
        if (result.outcome === 'delivered') {
          await recordWebhookOutcome('record: delivered', [{ deliveryId: input.deliveryId, run, delivered: true, error: null }]);
          status('delivered', attempt);
          setCurrentDetails(`Run ${run}: delivered on attempt ${attempt}/${attempts}.`);
          return 'delivered';
        }
        lastError = result.error;
      } catch (err) {
        if (cancelled(err)) throw err;
        // A failed POST (the activity failed with its status and the start of the answer), or the activity itself
        // failed (worker lost, time-out): a failed attempt either way.
        lastError = errorOf(err);
      }
    }
    await recordWebhookOutcome('record: failed after every attempt', [{ deliveryId: input.deliveryId, run, delivered: false, error: lastError }]);
    // Exhausted: findable as ConciergeDeliveryStatus = 'failed' for as long as the delivery is failed. The run stays
    // open (no timer: only a condition on the signal) until the API's retry or replay, whose attempt 1 the outbox
    // dispatcher makes and reports here; a cancel ends it `cancelled`.
    status('failed', attempts, lastError);
    setCurrentDetails(
      `Run ${run}: failed after ${attempts} attempts. Last error: ${lastError}\n\n` +
        'POST /api/v1/webhook-subscriptions/{id}/deliveries/{delivery_id}/retry (or …/replay, or POST /api/v1/webhook-deliveries/retry) delivers it again; this run waits for it.',
    );
    state.skipWait = false;
    await condition(() => state.next !== null);
    const next = state.next!;
    state.next = null;
    state.run = next.run;
    if (next.outcome === 'delivered') {
      // The dispatcher's attempt settled the record already.
      status('delivered', 1);
      setCurrentDetails(`Run ${next.run}: delivered on attempt 1/${attempts} (by the outbox dispatcher).`);
      return 'delivered';
    }
    first = next.outcome === 'failed' ? 2 : 1;
    lastError = next.error;
  }
}

/** The runs begun before WEBHOOK_WAITS_PATCH, as they ran: kept so their histories replay. */
async function deliverBeforeWaits(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const { attemptWebhookDelivery } = proxyActivities<Activities>(singleAttempt(input.timeoutMs));
  // The outcome is a short database step: a local activity since the local-db-steps patch.
  const { recordWebhookOutcome } = shortSteps(['recordWebhookOutcome'], presets.bookkeeping, localPresets.bookkeeping);

  const attempts = input.backoffMs.length + 1;
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
