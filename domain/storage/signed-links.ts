import type { SecretBox } from '../../lib/crypto/secret-box';

export interface LinkedBlob {
  sha256: string;
  mime: string;
  name?: string;
}

/** How long a media link works. */
export const LINK_TTL_SECONDS = 24 * 3600;

/**
 * Signed, expiring download links for stored bytes (media of inbound messages, widget
 * files): `<base>/api/media/<payload>.<mac>` where the payload names the blob and its
 * expiry. Anyone holding the link may download until it expires; nothing else can be
 * fetched. Links are absolute (`baseUrl` is PUBLIC_BASE_URL): a webhook receiver, or a
 * widget on another site, cannot resolve a bare path against this API.
 */
export function signLink(box: SecretBox, baseUrl: string, blob: LinkedBlob, ttlSeconds = LINK_TTL_SECONDS, now = Date.now()): string {
  const payload = Buffer.from(JSON.stringify({ ...blob, exp: Math.floor(now / 1000) + ttlSeconds })).toString('base64url');
  return `${baseUrl.replace(/\/+$/, '')}/api/media/${payload}.${box.mac(payload)}`;
}

export function openLink(box: SecretBox, token: string, now = Date.now()): LinkedBlob | null {
  const [payload, mac] = token.split('.');
  if (!payload || !mac || !box.verifyMac(payload, mac)) return null;
  try {
    const v = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as LinkedBlob & { exp: number };
    if (typeof v.exp !== 'number' || v.exp * 1000 < now || !/^[0-9a-f]{64}$/.test(v.sha256)) return null;
    return { sha256: v.sha256, mime: v.mime, name: v.name };
  } catch {
    return null;
  }
}
