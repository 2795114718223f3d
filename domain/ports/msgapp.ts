/**
 * Messaging's port: what the domain asks of a WhatsApp-style carrier (sending, phone numbers,
 * media) and the shapes of what the carrier reports (inbound messages, delivery statuses).
 * providers/msgapp/cloud-api.ts implements it against the WhatsApp Cloud API (Graph).
 */

/** The message kinds the domain tells apart; anything else arrives as `unsupported`. */
export type InboundKind = 'text' | 'image' | 'audio' | 'video' | 'document' | 'voice' | 'location' | 'sticker' | 'unsupported';
export type DeliveryStatus = 'sent' | 'delivered' | 'read' | 'failed';

export type OutboundContent =
  | { kind: 'text'; text: string }
  | { kind: 'image' | 'video'; url: string; caption?: string }
  | { kind: 'audio'; url: string }
  | { kind: 'document'; url: string; caption?: string; filename?: string }
  | { kind: 'location'; latitude: number; longitude: number; name?: string; address?: string }
  | { kind: 'template'; name: string; language?: string; variables?: string[] };

export interface SendRequest {
  phoneNumberId: string;
  accessToken: string;
  /** E.164. */
  to: string;
  content: OutboundContent;
  /**
   * Our message id. The Cloud API has no idempotency key; this travels as
   * `biz_opaque_callback_data`, which Meta echoes in every status callback, so a message
   * whose send response was lost can still be matched to its statuses.
   */
  clientMessageId: string;
}

export interface SendResult {
  providerMessageId: string;
}

export interface DownloadedMedia {
  bytes: Buffer;
  mimeType: string;
  filename?: string;
}

/** Graph error details beyond status and code. */
export interface ProviderErrorDetails {
  subcode?: number;
  type?: string;
  fbtraceId?: string;
  details?: string;
}

/**
 * A failed provider call. `status` is the HTTP status, 0 when no response arrived;
 * `code` the Graph error code (a number), or `'timeout'`, `'transport'`,
 * `'invalid_response'`, `'too_large'`.
 *
 * `retryable` means trying again later may succeed. A transport error or time-out on a
 * send is retryable but ambiguous: Meta may have accepted the message, so a retry can
 * deliver it twice (the Cloud API cannot de-duplicate).
 */
export class ProviderError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | number | undefined,
    message: string,
    readonly retryable: boolean,
    readonly graph: ProviderErrorDetails = {},
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}

/** What `GET /{phone-number-id}` says about a business number the token can see. */
export interface PhoneNumberInfo {
  id: string;
  displayPhoneNumber: string;
  verifiedName?: string;
}

/** A number of a business account, as `GET /{waba-id}/phone_numbers` lists it. */
export interface BusinessPhoneNumber extends PhoneNumberInfo {
  qualityRating?: string;
}

export interface MsgappProvider {
  send(req: SendRequest): Promise<SendResult>;
  /**
   * The phone numbers of a WhatsApp Business Account, as the token sees them (Graph's
   * `GET /{waba-id}/phone_numbers`, every page). A token without access to the account
   * gets a Graph error (100/33, 190): a non-retryable ProviderError.
   */
  listPhoneNumbers(businessAccountId: string, accessToken: string): Promise<BusinessPhoneNumber[]>;
  downloadMedia(mediaId: string, accessToken: string): Promise<DownloadedMedia>;
  /**
   * The number as the token sees it. A token that does not own the number gets a Graph
   * error (code 100 subcode 33 "does not exist, cannot be loaded due to missing
   * permissions", 10/200 permission, 190 bad token): a non-retryable ProviderError.
   */
  getPhoneNumber(phoneNumberId: string, accessToken: string): Promise<PhoneNumberInfo>;
}

export interface InboundMessage {
  /** Our business number that received it. */
  phoneNumberId: string;
  displayPhoneNumber: string;
  /** The customer, E.164 (`+` and the wa_id digits). */
  from: string;
  /** The customer's WhatsApp profile name, when Meta sent one. */
  profileName: string | null;
  providerMessageId: string;
  timestamp: Date;
  kind: InboundKind;
  /** The type Meta sent, e.g. `interactive` for a message whose kind is `unsupported`. */
  rawType: string;
  /** The body of a text message, or the caption of a media message; null otherwise. */
  text: string | null;
  media?: { mediaId: string; mimeType: string; sha256?: string; filename?: string; caption?: string };
  location?: { latitude: number; longitude: number; name?: string; address?: string };
  /** The wamid this message replies to (WhatsApp "reply" context). */
  replyTo?: string;
}

export interface StatusUpdate {
  phoneNumberId: string;
  providerMessageId: string;
  status: DeliveryStatus;
  timestamp: Date;
  /** E.164. */
  recipient: string;
  /** Echo of `biz_opaque_callback_data`: the clientMessageId we sent it with. */
  clientMessageId?: string;
  /** Failures: a readable reason, e.g. `(#131026) Message undeliverable: Receiver is incapable...`. */
  error?: string;
  errorCode?: number;
}

const RANK: Record<DeliveryStatus, number> = { sent: 1, delivered: 2, read: 3, failed: 4 };

/**
 * Whether a status update should replace the one we hold. Meta neither orders nor
 * de-duplicates its callbacks (and timestamps have one-second resolution), so a status only
 * ever moves forward: sent < delivered < read, and failed is final.
 */
export function statusSupersedes(current: DeliveryStatus | null | undefined, next: DeliveryStatus): boolean {
  if (!current) return true;
  if (current === 'failed') return false;
  return RANK[next] > RANK[current];
}

export interface ParsedWebhook {
  inbound: InboundMessage[];
  statuses: StatusUpdate[];
  /** Items that could not be used (malformed message or status, unknown status value...). */
  skipped: Array<{ where: string; reason: string }>;
}

export class WebhookPayloadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookPayloadError';
  }
}

/** The carrier's webhook: its signature over the raw body, and its payload as inbound messages and statuses. */
export interface CarrierWebhooks {
  /** Whether `header` (X-Hub-Signature-256) signs `rawBody` under the app secret; constant-time. */
  verifySignature(rawBody: Buffer, header: string | undefined, appSecret: string): boolean;
  /** The payload's messages and statuses; a body that is not the carrier's shape: WebhookPayloadError. */
  parse(body: unknown): ParsedWebhook;
}
