import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** 256 random bits, base64url (43 characters): session cookies, one-time links, CSRF tokens. */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

/** What is stored of a session or link token: its SHA-256, hex. A leaked table opens nothing. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
