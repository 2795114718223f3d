import type { SecretBox } from './secret-box';

/** A direct room token: `v1.<room>.<identity>.<expires, unix s>.<mac>` (HMAC-SHA256 under the box's link key). */
export function mintRoomToken(box: SecretBox, room: string, identity: string, ttlSeconds: number, now = Date.now()): string {
  const exp = Math.floor(now / 1000) + ttlSeconds;
  const body = `v1.${room}.${identity}.${exp}`;
  return `${body}.${box.mac(`voice-room:${body}`)}`;
}

/** The room a token grants, or null (malformed, forged, expired); constant-time MAC check. */
export function verifyRoomToken(box: SecretBox, token: string, now = Date.now()): { room: string; identity: string } | null {
  const m = /^v1\.(vs_[0-9a-f]{24})\.([A-Za-z0-9_-]{1,100})\.(\d{1,12})\.([0-9a-f]{64})$/.exec(token);
  if (!m) return null;
  const body = `v1.${m[1]}.${m[2]}.${m[3]}`;
  if (!box.verifyMac(`voice-room:${body}`, m[4])) return null;
  if (Number(m[3]) * 1000 < now) return null;
  return { room: m[1], identity: m[2] };
}
