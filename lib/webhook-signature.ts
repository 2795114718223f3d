import { createHmac, timingSafeEqual } from 'node:crypto';

/** `X-Concierge-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the whole `whsec_` string. */
export function signatureHeader(secret: string, rawBody: string | Buffer, timestampSeconds: number): string {
  return `t=${timestampSeconds},v1=${hmacHex(secret, timestampSeconds, rawBody)}`;
}

function hmacHex(secret: string, t: number | string, rawBody: string | Buffer): string {
  return createHmac('sha256', secret).update(`${t}.`).update(rawBody).digest('hex');
}

export class WebhookVerificationError extends Error {}

/**
 * Verifies a delivery the way a receiver must: against the raw bytes, before parsing;
 * rejecting a timestamp more than `toleranceSeconds` away from now in either
 * direction; comparing in constant time; accepting any of several `v1=` entries
 * (sent while a secret rotates). Returns the parsed JSON event; throws
 * WebhookVerificationError otherwise.
 */
export function verifyWebhook(
  rawBody: string | Buffer,
  signatureHeaderValue: string | undefined | null,
  secret: string,
  opts: { toleranceSeconds?: number; now?: () => number } = {},
): unknown {
  const tolerance = opts.toleranceSeconds ?? 300;
  if (!signatureHeaderValue) throw new WebhookVerificationError('missing signature header');
  let t: string | undefined;
  const candidates: string[] = [];
  for (const part of signatureHeaderValue.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === 't') t = value;
    else if (name === 'v1') candidates.push(value);
  }
  if (!t || !/^\d{1,12}$/.test(t)) throw new WebhookVerificationError('signature header has no valid timestamp');
  if (candidates.length === 0) throw new WebhookVerificationError('signature header has no v1 signature');
  const nowSeconds = Math.floor((opts.now ?? Date.now)() / 1000);
  if (Math.abs(nowSeconds - Number(t)) > tolerance) throw new WebhookVerificationError('timestamp outside the tolerance');
  const expected = Buffer.from(hmacHex(secret, t, rawBody), 'hex');
  const ok = candidates.some((c) => {
    if (!/^[0-9a-f]{64}$/i.test(c)) return false;
    return timingSafeEqual(Buffer.from(c, 'hex'), expected);
  });
  if (!ok) throw new WebhookVerificationError('no signature matches');
  return JSON.parse(Buffer.isBuffer(rawBody) ? rawBody.toString('utf8') : rawBody);
}
