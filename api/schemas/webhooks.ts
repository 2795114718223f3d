import { z } from 'zod';
import { Cursor, idString, TimestampBound } from './common';
import { SUBSCRIBABLE_EVENTS } from '../../domain/webhooks/events';

const Timestamp = z.string().meta({ format: 'date-time' });
const EventName = z.enum(SUBSCRIBABLE_EVENTS);

export const WebhookUrl = z.string().min(1).max(2048).meta({
  // The contract's https (the scheme, case-insensitive as URLs read it); the address rules are a runtime fact of DNS.
  pattern: '^[Hh][Tt][Tt][Pp][Ss]://',
  description: 'https URL of a public host; refused with 400 invalid_url when not https or when the host is or resolves to a private, loopback, link-local or otherwise reserved address',
  example: 'https://example.com/hooks/concierge',
});

export const Subscription = z
  .object({
    id: z.string().meta({ example: 'whk_5d1c2b3a4f5e6d7c8b9a0f1e' }),
    url: z.string(),
    events: z.array(EventName),
    status: z.enum(['active', 'disabled']),
    consecutive_failures: z.number().int(),
    last_error: z.string().nullable(),
    last_failed_at: Timestamp.nullable(),
    last_delivered_at: Timestamp.nullable(),
    disabled_reason: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'WebhookSubscription' });

export const SubscriptionHealth = z
  .object({
    failing_since: Timestamp.nullable().meta({ description: 'The first failed attempt (or failed or cancelled delivery) since the last successful delivery; null when nothing failed since' }),
    retrying_now: z.number().int().meta({ description: 'Deliveries in a retry run now: their first attempt failed and further attempts are under way or waiting' }),
    failed_now: z.number().int().meta({ description: 'Deliveries failed now (all attempts failed, or cancelled by an operator) and not retried since' }),
    last_error: z.string().nullable().meta({ description: 'The newest failed attempt\'s error (or a cancelled delivery\'s reason) since the last successful delivery; null when none' }),
    last_delivered_at: Timestamp.nullable(),
  })
  .meta({ id: 'WebhookSubscriptionHealth', description: 'In-flight trouble, beside the counters of exhausted deliveries (consecutive_failures, last_error)' });

export const SubscriptionWithHealth = Subscription.extend({ health: SubscriptionHealth }).meta({ id: 'WebhookSubscriptionWithHealth' });

export const SubscriptionWithSecret = Subscription.extend({
  secret: z.string().meta({ description: 'Signing secret `whsec_…`: returned only here, at creation and at rotation. The HMAC key is the whole string.' }),
}).meta({ id: 'WebhookSubscriptionWithSecret' });

export const SubscriptionUpdateResult = Subscription.extend({
  secret: z.string().optional().meta({ description: 'Present only when rotate_secret was true: the new secret, shown once' }),
});

export const SubscriptionList = z.object({ subscriptions: z.array(SubscriptionWithHealth) }).meta({ id: 'WebhookSubscriptionList' });

export const CreateSubscriptionBody = z
  .object({
    url: WebhookUrl,
    events: z.array(EventName).min(1).meta({ description: 'Non-empty subset of message.inbound, message.status' }),
  })
  .strict();

export const UpdateSubscriptionBody = z
  .object({
    url: WebhookUrl.optional(),
    events: z.array(EventName).min(1).optional(),
    status: z.enum(['active', 'disabled']).optional().meta({ description: '`active` re-enables and clears the failure counter; `disabled` pauses' }),
    rotate_secret: z.boolean().optional().meta({ description: 'true issues a new secret (returned once); the old one stops signing at once' }),
  })
  .strict()
  .refine((b) => Object.keys(b).length > 0, 'body: at least one of url, events, status, rotate_secret')
  .meta({ minProperties: 1 });

export const TestResult = z
  .object({
    delivered: z.boolean(),
    status: z.number().int().meta({ description: "The subscriber's HTTP status; 0 when it never answered" }),
    error: z.string().optional().meta({ description: 'The transport error, when status is 0' }),
  })
  .meta({ id: 'WebhookTestResult' });

export const Delivery = z
  .object({
    id: z.string().meta({ description: 'Also the X-Concierge-Delivery header, identical on every attempt and retry' }),
    event_id: z.string(),
    event_type: z.string(),
    subscription_id: z.string(),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempt_count: z.number().int(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    completed_at: Timestamp.nullable(),
  })
  .meta({ id: 'WebhookDelivery' });

export const Attempt = z.object({
  run: z.number().int().meta({ description: '1 for the original delivery; +1 for each retry or replay' }),
  attempt: z.number().int(),
  started_at: Timestamp,
  status_code: z.number().int().nullable(),
  error: z.string().nullable(),
  latency_ms: z.number().int(),
  response_body: z.string().nullable().meta({ description: 'First 1 KB of the response body' }),
});

export const DeliveryDetail = Delivery.extend({
  attempts: z.array(Attempt),
  payload: z.unknown().meta({ description: 'The event envelope exactly as delivered: {id, event, created_at, data}' }),
}).meta({ id: 'WebhookDeliveryDetail' });

export const DeliveryList = z.object({ deliveries: z.array(Delivery), next_cursor: z.string().nullable() }).meta({ id: 'WebhookDeliveryList' });

export const ListDeliveriesQuery = z.object({
  status: z.enum(['pending', 'delivered', 'failed']).optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});

const DeliveryWindow = {
  // A filter, not a reference: an id of no subscription (or another workspace's) matches nothing, so no pattern refuses it.
  subscription_id: z.string().min(1).max(100).optional().meta({ description: 'Only this subscription\'s deliveries (whk_…; an id of no subscription of this workspace matches nothing)' }),
  since: TimestampBound.optional().meta({ description: 'Created at or after (inclusive)' }),
  until: TimestampBound.optional().meta({ description: 'Created before (exclusive); a window with until not after since matches nothing' }),
};

export const ListAllDeliveriesQuery = z.object({
  status: z.enum(['pending', 'delivered', 'failed']).default('failed').meta({ description: '`failed` (the default): every attempt failed, or an operator cancelled it' }),
  ...DeliveryWindow,
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});

export const RetryAllBody = z.object(DeliveryWindow).strict();

export const RetryAllResult = z
  .object({
    retried: z.number().int(),
    delivery_ids: z.array(z.string()).meta({ description: 'The deliveries moved back to pending as a new run, oldest first' }),
    more: z.boolean().meta({ description: 'More failed deliveries match (at most 500 move per call): call again' }),
  })
  .meta({ id: 'WebhookRetryAllResult' });

export const DeliveryParams = z.object({ id: idString('whk'), delivery_id: idString('dlv') });

export const ReplayBody = z
  .object({
    since: TimestampBound.meta({ description: 'Inclusive' }),
    until: TimestampBound.meta({ description: 'Exclusive; must be after since (else 400 invalid_request)' }),
  })
  .strict()
  .refine((b) => Date.parse(b.since) < Date.parse(b.until), { message: 'must be after since', path: ['until'] });

export const ReplayResult = z.object({ replayed: z.number().int(), delivery_ids: z.array(z.string()) }).meta({ id: 'WebhookReplayResult' });

// Delivery payloads, documented under the OpenAPI document's top-level `webhooks`.
const Media = z.object({
  type: z.enum(['image', 'audio', 'video', 'document', 'voice']),
  mime_type: z.string(),
  url: z.string().meta({ description: 'Signed, expiring download link' }),
  filename: z.string().optional(),
  size: z.number().int().optional(),
});

const envelope = <T extends z.ZodType>(event: string, data: T, description: string) =>
  z
    .object({
      id: z.string().meta({ description: 'Event id (evt_…); the same on every delivery of this event' }),
      event: z.literal(event),
      created_at: Timestamp,
      data,
    })
    .meta({ description });

export const WEBHOOK_EVENTS = {
  'message.inbound': envelope(
    'message.inbound',
    z.object({
      message_id: z.string(),
      channel: z.literal('msgapp'),
      from: z.string(),
      to: z.string(),
      text: z.string().nullable(),
      profile_name: z.string().nullable(),
      received_at: Timestamp,
      media: z.array(Media).optional().meta({ description: 'Present for image, audio, document or voice notes' }),
      media_error: z.string().optional().meta({ description: 'Why the media bytes could not be obtained' }),
    }),
    'A customer wrote in. Delivered whether or not an agent also answers.',
  ),
  'message.status': envelope(
    'message.status',
    z.object({
      message_id: z.string(),
      channel: z.literal('msgapp'),
      status: z.enum(['sent', 'delivered', 'read', 'failed']),
      conversation_id: z.string(),
      occurred_at: Timestamp,
      error: z.string().optional().meta({ description: "The provider's reason, for a failure" }),
    }),
    'A message sent through POST /api/v1/messages changed delivery state.',
  ),
  'webhook.test': envelope(
    'webhook.test',
    z.object({ subscription_id: z.string(), message: z.string() }),
    'Sent only by POST /api/v1/webhook-subscriptions/{id}/test; cannot be subscribed to.',
  ),
} as const;

export const DELIVERY_HEADERS = {
  'X-Concierge-Signature': 't=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the whole whsec_ secret>; verify the raw bytes, reject |now - t| > 300 s, compare in constant time',
  'X-Concierge-Event': 'The event type',
  'X-Concierge-Delivery': 'Delivery id (dlv_…): identical on every attempt and retry; use it to deduplicate',
} as const;
