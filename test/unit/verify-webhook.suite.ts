import { createHmac } from 'node:crypto';
import { verifyWebhook, WebhookVerificationError } from '../../lib/webhook-signature';
import { signatureHeader } from '../../lib/webhook-signature';

const secret = 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA';
const body = JSON.stringify({ id: 'evt_1', event: 'message.status', created_at: '2026-11-22T00:00:00.000Z', data: { status: 'read' } });
const now = Math.floor(Date.now() / 1000);

/** An implementation independent of ours: Node's HMAC, written out as the contract words it (docs/contract.md). */
const independent = (t: number, raw: string, key = secret) => `t=${t},v1=${createHmac('sha256', key).update(`${t}.${raw}`).digest('hex')}`;

describe('signing and verifyWebhook', () => {
  test('our signature equals an independent HMAC-SHA256 over "<t>.<raw body>" keyed with the whole whsec_ string', () => {
    expect(signatureHeader(secret, body, now)).toBe(independent(now, body));
  });

  test('accepts a valid signature on the raw bytes (string or Buffer) and returns the parsed event', () => {
    expect(verifyWebhook(body, independent(now, body), secret)).toMatchObject({ id: 'evt_1' });
    expect(verifyWebhook(Buffer.from(body), independent(now, body), secret)).toMatchObject({ event: 'message.status' });
  });

  test('rejects a tampered body, a wrong secret, a missing or malformed header', () => {
    const header = independent(now, body);
    expect(() => verifyWebhook(body.replace('read', 'sent'), header, secret)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(body, header, `${secret}x`)).toThrow(/no signature matches/);
    expect(() => verifyWebhook(body, undefined, secret)).toThrow(/missing/);
    expect(() => verifyWebhook(body, 'v1=abc', secret)).toThrow(/timestamp/);
    expect(() => verifyWebhook(body, `t=${now}`, secret)).toThrow(/no v1/);
    expect(() => verifyWebhook(body, `t=${now},v1=zz`, secret)).toThrow(/no signature matches/);
  });

  test('rejects timestamps more than 300 s away, in the past or the future; the tolerance is configurable', () => {
    // The receiver's clock is pinned: a test started seconds after `now` was read (a loaded CI machine) must not
    // move the boundary.
    const clock = { now: () => now * 1000 };
    expect(() => verifyWebhook(body, independent(now - 301, body), secret, clock)).toThrow(/tolerance/);
    expect(() => verifyWebhook(body, independent(now + 301, body), secret, clock)).toThrow(/tolerance/);
    expect(verifyWebhook(body, independent(now - 300, body), secret, clock)).toBeTruthy();
    expect(verifyWebhook(body, independent(now + 300, body), secret, clock)).toBeTruthy();
    expect(() => verifyWebhook(body, independent(now - 60, body), secret, { ...clock, toleranceSeconds: 30 })).toThrow(/tolerance/);
    // Without a pinned clock the receiver reads the real one.
    const realNow = Math.floor(Date.now() / 1000);
    expect(() => verifyWebhook(body, independent(realNow - 3600, body), secret)).toThrow(/tolerance/);
    expect(verifyWebhook(body, independent(realNow, body), secret)).toBeTruthy();
  });

  test('accepts any of several v1 entries (as sent while a secret rotates)', () => {
    const other = independent(now, body, 'whsec_other').split(',')[1];
    const good = independent(now, body).split(',')[1];
    expect(verifyWebhook(body, `t=${now},${other},${good}`, secret)).toBeTruthy();
    expect(() => verifyWebhook(body, `t=${now},${other}`, secret)).toThrow(/no signature matches/);
  });
});
