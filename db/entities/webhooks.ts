import { defineEntity, type InferEntity } from '@mikro-orm/core';
import { createdAt, createdAtMs, p, updatedAt } from './common';

export const WebhookSubscription = defineEntity({
  name: 'WebhookSubscription',
  tableName: 'webhook_subscriptions',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    url: p.text(),
    events: p.array(),
    status: p.enum(['active', 'disabled'] as const).columnType('text'),
    /** The signing secret, sealed and bound to the subscription id. */
    secretSealed: p.text(),
    consecutiveFailures: p.integer().default(0),
    lastError: p.text().nullable(),
    lastFailedAt: p.datetime().nullable(),
    lastDeliveredAt: p.datetime().nullable(),
    disabledReason: p.text().nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
});
export type IWebhookSubscription = InferEntity<typeof WebhookSubscription>;

/** The outbox: the envelope serialised once, sent as is by every delivery. */
export const WebhookEvent = defineEntity({
  name: 'WebhookEvent',
  tableName: 'webhook_events',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    type: p.text(),
    payload: p.text(),
    createdAt: createdAt(),
  },
});
export type IWebhookEvent = InferEntity<typeof WebhookEvent>;

export const WebhookDelivery = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  properties: {
    id: p.text().primary(),
    workspaceId: p.text(),
    eventId: p.text(),
    subscriptionId: p.text(),
    eventType: p.text(),
    status: p.enum(['pending', 'delivered', 'failed'] as const).columnType('text'),
    attemptCount: p.integer().default(0),
    lastStatusCode: p.integer().nullable(),
    lastError: p.text().nullable(),
    /** Set once the current run left the outbox: delivered by the dispatcher's first attempt, or handed to its retry workflow. */
    dispatchedAt: p.datetime().nullable(),
    /** While the dispatcher's first attempt is under way: no other dispatcher takes the row before this time. */
    inlineLeaseUntil: p.datetime().nullable(),
    /** Bumped by retry/replay; the workflow id carries it so each run is its own workflow. */
    run: p.integer().default(1),
    createdAt: createdAtMs().defaultRaw('now()'),
    updatedAt: updatedAt(),
    completedAt: p.datetime().nullable(),
  },
});
export type IWebhookDelivery = InferEntity<typeof WebhookDelivery>;

export const WebhookAttempt = defineEntity({
  name: 'WebhookAttempt',
  tableName: 'webhook_attempts',
  properties: {
    deliveryId: p.text().primary(),
    run: p.integer().primary(),
    attempt: p.integer().primary(),
    startedAt: p.datetime(),
    statusCode: p.integer().nullable(),
    error: p.text().nullable(),
    latencyMs: p.integer(),
    responseBody: p.text().nullable(),
  },
});
export type IWebhookAttempt = InferEntity<typeof WebhookAttempt>;
