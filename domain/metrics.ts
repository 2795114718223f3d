import { Counter } from 'prom-client';
import { registry } from '../lib/metrics-registry';

/**
 * The domain's outcome counters (docs/operations.md "Metrics"): incremented where the outcome is
 * recorded, with one call. Served with the rest of the process's metrics by app/metrics.ts.
 */

const webhookAttempts = new Counter({
  name: 'concierge_webhook_attempts_total',
  help: 'Webhook delivery attempts, by outcome: delivered (2xx), failed (non-2xx or transport error), gone (subscription or event deleted)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
for (const outcome of ['delivered', 'failed', 'gone']) webhookAttempts.inc({ outcome }, 0);

/**
 * Counts one webhook attempt by the outcome the delivery service recorded (`failed_attempt`
 * counts as failed; `settled` is not an attempt: nothing was sent) and hands the result back,
 * so the call wraps a return.
 */
export function countWebhookAttempt<T extends { outcome: 'delivered' | 'failed_attempt' | 'gone' | 'settled' }>(result: T): T {
  const outcome = result.outcome === 'failed_attempt' ? 'failed' : result.outcome;
  if (outcome === 'delivered' || outcome === 'failed' || outcome === 'gone') webhookAttempts.inc({ outcome });
  return result;
}

const sends = new Counter({
  name: 'concierge_message_sends_total',
  help: 'Outbound messages settled, by channel and outcome (sent: the provider took it; failed: it refused or the send gave up)',
  labelNames: ['channel', 'outcome'] as const,
  registers: [registry],
});
for (const outcome of ['sent', 'failed']) sends.inc({ channel: 'msgapp', outcome }, 0);

/** One outbound message settled (called once per message, where the status moves). */
export function countSend(outcome: 'sent' | 'failed', channel = 'msgapp'): void {
  sends.inc({ channel, outcome });
}
