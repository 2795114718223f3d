import { randomBytes } from 'node:crypto';
import { DeliveryError, safePost, type SafePostResult } from '../../lib/net/safe-http';
import type { AddressPolicy, Resolver } from '../../lib/net/ssrf';
import { signatureHeader } from '../../lib/webhook-signature';

/** How deliveries reach the network: the SSRF policy and, for tests, a resolver and extra CAs. */
export interface SenderSettings {
  policy: AddressPolicy;
  timeoutMs: number;
  resolve?: Resolver;
  ca?: string | Buffer | Array<string | Buffer>;
}

export interface SendOutcome {
  ok: boolean;
  /** The receiver's status code; 0 when it never answered. */
  statusCode: number;
  error: string | null;
  latencyMs: number;
  responseBody: string | null;
}

export const USER_AGENT = 'Concierge-Webhooks/1.0 (+https://github.com/concierge)';

export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/** One signed POST of a stored body: fresh timestamp, same delivery id on every attempt. */
export async function sendSigned(
  settings: SenderSettings,
  req: { url: string; secret: string; eventType: string; deliveryId: string; body: string },
): Promise<SendOutcome> {
  const started = Date.now();
  const headers = {
    'Content-Type': 'application/json',
    'X-Concierge-Signature': signatureHeader(req.secret, req.body, Math.floor(Date.now() / 1000)),
    'X-Concierge-Event': req.eventType,
    'X-Concierge-Delivery': req.deliveryId,
  };
  try {
    const res: SafePostResult = await safePost(req.url, {
      headers,
      body: req.body,
      timeoutMs: settings.timeoutMs,
      policy: settings.policy,
      resolve: settings.resolve,
      ca: settings.ca,
      userAgent: USER_AGENT,
    });
    const ok = res.status >= 200 && res.status < 300;
    return { ok, statusCode: res.status, error: ok ? null : `HTTP ${res.status}`, latencyMs: res.latencyMs, responseBody: res.body };
  } catch (err) {
    const message = err instanceof DeliveryError ? `${err.kind}: ${err.message}` : `transport: ${(err as Error).message}`;
    return { ok: false, statusCode: 0, error: message, latencyMs: Date.now() - started, responseBody: null };
  }
}
