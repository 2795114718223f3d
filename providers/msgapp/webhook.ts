import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { CarrierWebhooks, DeliveryStatus, InboundKind, InboundMessage, StatusUpdate } from '../../domain/ports/msgapp';
import { WebhookPayloadError, type ParsedWebhook } from '../../domain/ports/msgapp';
export { WebhookPayloadError, type ParsedWebhook } from '../../domain/ports/msgapp';
export { statusSupersedes, type InboundMessage, type StatusUpdate } from '../../domain/ports/msgapp';

/**
 * The inbound side of the WhatsApp Cloud API as msgapp sees it: the `X-Hub-Signature-256`
 * check, the zod schemas of the `messages` webhook field, and `parseWebhook`, which turns
 * one delivery into our own shapes.
 *
 * The schemas are deliberately lenient where Meta adds fields over time (unknown keys are
 * ignored) and strict where we depend on a value. One malformed message or status never
 * costs the rest of the delivery: items are parsed one by one, and the ones that cannot be
 * used are reported in `skipped` instead of throwing.
 */

// ---------------------------------------------------------------------------------------
// Signatures

const SIGNATURE_RE = /^sha256=([0-9a-f]{64})$/i;

/** `sha256=<hex HMAC-SHA256(rawBody, appSecret)>`, the value of `X-Hub-Signature-256`. */
export function signHubPayload(rawBody: Buffer | string, appSecret: string): string {
  if (!appSecret) throw new Error('signHubPayload: the app secret is empty');
  return `sha256=${createHmac('sha256', appSecret).update(rawBody).digest('hex')}`;
}

/**
 * Checks `X-Hub-Signature-256` against the raw request bytes (before any JSON parsing), in
 * constant time. False for a missing or malformed header, and always false for an empty
 * app secret (an HMAC under an empty key is one anybody can compute).
 */
export function verifyHubSignature(rawBody: Buffer, header: string | undefined, appSecret: string): boolean {
  if (!appSecret || typeof header !== 'string') return false;
  const m = SIGNATURE_RE.exec(header.trim());
  if (!m) return false;
  const expected = createHmac('sha256', appSecret).update(rawBody).digest();
  return timingSafeEqual(Buffer.from(m[1], 'hex'), expected);
}

// ---------------------------------------------------------------------------------------
// Schemas of the Cloud API `messages` webhook field

/** Unix seconds, sent by Meta as a decimal string. */
const UnixSeconds = z.union([z.string().regex(/^\d{1,12}$/), z.number().int().nonnegative()]);

export const WebhookMetadataSchema = z.object({
  display_phone_number: z.string(),
  phone_number_id: z.string().min(1),
});

export const WebhookContactSchema = z.object({
  profile: z.object({ name: z.string().optional() }).optional(),
  wa_id: z.string(),
});

const MediaObject = z.object({
  id: z.string().min(1),
  mime_type: z.string().min(1),
  sha256: z.string().optional(),
  caption: z.string().optional(),
  filename: z.string().optional(),
  /** Audio only: true for a voice note recorded in the app. */
  voice: z.boolean().optional(),
  /** Sticker only. */
  animated: z.boolean().optional(),
});

export const WebhookLocationSchema = z.object({
  latitude: z.number(),
  longitude: z.number(),
  name: z.string().optional(),
  address: z.string().optional(),
  url: z.string().optional(),
});

export const WebhookErrorSchema = z.object({
  code: z.number().int(),
  title: z.string().optional(),
  message: z.string().optional(),
  error_data: z.object({ details: z.string().optional() }).optional(),
  href: z.string().optional(),
});

/** The message types we understand; anything else is kept as `unsupported`. */
export const KNOWN_MESSAGE_TYPES = ['text', 'image', 'audio', 'video', 'document', 'voice', 'location', 'sticker'] as const;
export const WebhookMessageTypeSchema = z.enum(KNOWN_MESSAGE_TYPES);

/**
 * One entry of `value.messages`. `type` is any string (the real API has more types than we
 * handle, including its own `unsupported`); the per-type objects are checked by
 * `parseWebhook` only for the type named.
 */
export const WebhookMessageSchema = z.object({
  from: z.string().min(1),
  id: z.string().min(1),
  timestamp: UnixSeconds,
  type: z.string().min(1),
  context: z.object({ from: z.string().optional(), id: z.string().optional() }).optional(),
  text: z.object({ body: z.string() }).optional(),
  image: z.unknown().optional(),
  audio: z.unknown().optional(),
  video: z.unknown().optional(),
  document: z.unknown().optional(),
  voice: z.unknown().optional(),
  sticker: z.unknown().optional(),
  location: z.unknown().optional(),
  errors: z.array(WebhookErrorSchema).optional(),
});

export const WebhookStatusValueSchema = z.enum(['sent', 'delivered', 'read', 'failed']);

export const WebhookStatusSchema = z.object({
  id: z.string().min(1),
  status: WebhookStatusValueSchema,
  timestamp: UnixSeconds,
  recipient_id: z.string(),
  biz_opaque_callback_data: z.string().optional(),
  conversation: z.unknown().optional(),
  pricing: z.unknown().optional(),
  errors: z.array(WebhookErrorSchema).optional(),
});

export const WebhookValueSchema = z.object({
  messaging_product: z.literal('whatsapp'),
  metadata: WebhookMetadataSchema,
  contacts: z.array(WebhookContactSchema).optional(),
  messages: z.array(z.unknown()).optional(),
  statuses: z.array(z.unknown()).optional(),
  errors: z.array(WebhookErrorSchema).optional(),
});

export const WebhookPayloadSchema = z.object({
  object: z.literal('whatsapp_business_account'),
  entry: z.array(
    z.object({
      id: z.string(),
      changes: z.array(z.object({ field: z.string(), value: z.unknown() })),
    }),
  ),
});

export type WebhookPayload = z.infer<typeof WebhookPayloadSchema>;
export type WebhookValue = z.infer<typeof WebhookValueSchema>;
export type WebhookMessage = z.infer<typeof WebhookMessageSchema>;
export type WebhookStatus = z.infer<typeof WebhookStatusSchema>;
export type WebhookError = z.infer<typeof WebhookErrorSchema>;
export type WebhookLocation = z.infer<typeof WebhookLocationSchema>;

// ---------------------------------------------------------------------------------------
// Our shapes

// The ports name the kinds and statuses; the schemas above must parse exactly those.
export type { InboundKind, DeliveryStatus };
const _kinds: readonly InboundKind[] = KNOWN_MESSAGE_TYPES;
const _statuses: readonly DeliveryStatus[] = WebhookStatusValueSchema.options;
void _kinds;
void _statuses;

const e164 = (waId: string) => (waId.startsWith('+') ? waId : `+${waId}`);
const toDate = (t: string | number) => new Date(Number(t) * 1000);
const issues = (err: z.ZodError) => err.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');

/** `(#code) title: details`, the parts that are present and not repeated. */
export function describeGraphErrors(errors: WebhookError[] | undefined): string | undefined {
  if (!errors || errors.length === 0) return undefined;
  return errors
    .map((e) => {
      const parts: string[] = [];
      const title = e.title ?? e.message;
      if (title) parts.push(title);
      const details = e.error_data?.details;
      if (details && details !== title) parts.push(details);
      return `(#${e.code}) ${parts.join(': ') || 'error'}`;
    })
    .join('; ');
}

/**
 * Normalises one webhook delivery. Throws WebhookPayloadError when the envelope is not a
 * WhatsApp Business Account notification; changes of fields other than `messages`
 * (template and account updates) are ignored.
 */
export function parseWebhook(body: unknown): ParsedWebhook {
  const env = WebhookPayloadSchema.safeParse(body);
  if (!env.success) throw new WebhookPayloadError(`not a whatsapp_business_account webhook: ${issues(env.error)}`);
  const out: ParsedWebhook = { inbound: [], statuses: [], skipped: [] };

  env.data.entry.forEach((entry, ei) => {
    entry.changes.forEach((change, ci) => {
      const at = `entry[${ei}].changes[${ci}]`;
      if (change.field !== 'messages') return;
      const value = WebhookValueSchema.safeParse(change.value);
      if (!value.success) {
        out.skipped.push({ where: `${at}.value`, reason: issues(value.error) });
        return;
      }
      const { metadata, contacts = [], messages = [], statuses = [] } = value.data;
      const names = new Map(contacts.map((c) => [c.wa_id, c.profile?.name ?? null]));

      messages.forEach((raw, mi) => {
        const where = `${at}.value.messages[${mi}]`;
        const m = WebhookMessageSchema.safeParse(raw);
        if (!m.success) {
          out.skipped.push({ where, reason: issues(m.error) });
          return;
        }
        out.inbound.push(normaliseMessage(m.data, metadata, names.get(m.data.from) ?? (contacts.length === 1 ? (contacts[0].profile?.name ?? null) : null)));
      });

      statuses.forEach((raw, si) => {
        const where = `${at}.value.statuses[${si}]`;
        const s = WebhookStatusSchema.safeParse(raw);
        if (!s.success) {
          out.skipped.push({ where, reason: issues(s.error) });
          return;
        }
        const st = s.data;
        const update: StatusUpdate = {
          phoneNumberId: metadata.phone_number_id,
          providerMessageId: st.id,
          status: st.status,
          timestamp: toDate(st.timestamp),
          recipient: e164(st.recipient_id),
        };
        if (st.biz_opaque_callback_data !== undefined) update.clientMessageId = st.biz_opaque_callback_data;
        const error = describeGraphErrors(st.errors);
        if (error !== undefined) {
          update.error = error;
          update.errorCode = st.errors?.[0]?.code;
        } else if (st.status === 'failed') {
          update.error = 'failed without a reason from the provider';
        }
        out.statuses.push(update);
      });
    });
  });
  return out;
}

function normaliseMessage(m: WebhookMessage, metadata: z.infer<typeof WebhookMetadataSchema>, profileName: string | null): InboundMessage {
  const base: InboundMessage = {
    phoneNumberId: metadata.phone_number_id,
    displayPhoneNumber: metadata.display_phone_number,
    from: e164(m.from),
    profileName,
    providerMessageId: m.id,
    timestamp: toDate(m.timestamp),
    kind: 'unsupported',
    rawType: m.type,
    text: null,
  };
  if (m.context?.id) base.replyTo = m.context.id;

  switch (m.type) {
    case 'text':
      if (m.text) return { ...base, kind: 'text', text: m.text.body };
      return base;
    case 'image':
    case 'video':
    case 'document':
    case 'audio':
    case 'voice':
    case 'sticker': {
      const media = MediaObject.safeParse(m[m.type]);
      if (!media.success) return base;
      const o = media.data;
      // The Cloud API sends a voice note as type `audio` with `voice: true`.
      const kind: InboundKind = m.type === 'audio' && o.voice === true ? 'voice' : m.type;
      const out: InboundMessage = { ...base, kind, text: o.caption ?? null, media: { mediaId: o.id, mimeType: o.mime_type } };
      if (o.sha256 !== undefined) out.media!.sha256 = o.sha256;
      if (o.filename !== undefined) out.media!.filename = o.filename;
      if (o.caption !== undefined) out.media!.caption = o.caption;
      return out;
    }
    case 'location': {
      const loc = WebhookLocationSchema.safeParse(m.location);
      if (!loc.success) return base;
      const { latitude, longitude, name, address } = loc.data;
      const location: NonNullable<InboundMessage['location']> = { latitude, longitude };
      if (name !== undefined) location.name = name;
      if (address !== undefined) location.address = address;
      return { ...base, kind: 'location', location };
    }
    default:
      return base;
  }
}

// ---------------------------------------------------------------------------------------
// Ordering



/** The Cloud API's webhook behind the domain's port (wired in app/services.ts). */
export const cloudApiWebhooks: CarrierWebhooks = { verifySignature: verifyHubSignature, parse: parseWebhook };
