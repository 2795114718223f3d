import { randomInt } from 'node:crypto';

export interface HandshakeResult {
  /** True when the endpoint answered 200 with exactly the challenge. */
  ok: boolean;
  status: number | null;
  challenge: string;
  body: string;
  error?: string;
}

/**
 * Plays Meta's side of the webhook verification handshake against our endpoint:
 * `GET {url}?hub.mode=subscribe&hub.verify_token=...&hub.challenge=...`, which must answer
 * 200 with the challenge echoed as the whole body.
 */
export async function verifyWebhookHandshake(
  url: string,
  verifyToken: string,
  opts: { challenge?: string; timeoutMs?: number } = {},
): Promise<HandshakeResult> {
  const challenge = opts.challenge ?? String(randomInt(1, 2 ** 31 - 1));
  const u = new URL(url);
  u.searchParams.set('hub.mode', 'subscribe');
  u.searchParams.set('hub.verify_token', verifyToken);
  u.searchParams.set('hub.challenge', challenge);
  try {
    const res = await fetch(u, { method: 'GET', headers: { 'User-Agent': 'facebookplatform/1.0' }, signal: AbortSignal.timeout(opts.timeoutMs ?? 5_000) });
    const body = await res.text();
    return { ok: res.status === 200 && body === challenge, status: res.status, challenge, body };
  } catch (err) {
    return { ok: false, status: null, challenge, body: '', error: err instanceof Error ? err.message : String(err) };
  }
}
