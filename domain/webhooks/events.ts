/** Event types a subscription can name; `webhook.test` is sent only by the test endpoint. */
export const SUBSCRIBABLE_EVENTS = ['message.inbound', 'message.status'] as const;
export type SubscribableEvent = (typeof SUBSCRIBABLE_EVENTS)[number];
export type EventType = SubscribableEvent | 'webhook.test';

/** The JSON body of every delivery, serialised once when the event is recorded. */
export interface EventEnvelope {
  id: string;
  event: EventType;
  created_at: string;
  data: Record<string, unknown>;
}

export const OUTBOX_CHANNEL = 'concierge_webhook_outbox';

/** Consecutive failed deliveries that disable a subscription. */
export const DISABLE_AFTER_FAILURES = 20;
