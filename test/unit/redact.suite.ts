import { redactSecret } from '../../lib/crypto/redact';

/** The secret never survives in text a provider echoed, in whatever spelling it came back. */
const TOKEN = 'mcp-secret-token-0123456789';

test('the secret, its base64 (alone, inside an encoded header, URL-safe, wrapped), hex, percent-encoded and space-split forms are redacted', () => {
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const echoes = [
    `got ${TOKEN}`,
    `got ${b64(TOKEN)}`,
    `header was ${b64(`Bearer ${TOKEN}`)}`,
    `header was ${b64(`Authorization: Bearer ${TOKEN}`)}`,
    `url-safe ${Buffer.from(`x${TOKEN}`).toString('base64url')}`,
    `wrapped ${b64(`Bearer ${TOKEN}`).replace(/(.{10})/g, '$1\n')}`,
    `spaced ${[...TOKEN].join(' ')}`,
    `split ${TOKEN.slice(0, 9)}  ${TOKEN.slice(9)}`,
    `hex ${Buffer.from(TOKEN).toString('hex')}`,
    `encoded ${encodeURIComponent(`${TOKEN}/x`)}`,
  ];
  for (const text of echoes) {
    const out = redactSecret(text, TOKEN);
    expect({ text, out: out.includes('[redacted]') }).toEqual({ text, out: true });
    for (const form of [TOKEN, b64(TOKEN).slice(0, 20), TOKEN.slice(9)]) expect(out.replace(/\s+/g, '')).not.toContain(form.replace(/\s+/g, ''));
    expect(Buffer.from(out.replace(/[^A-Za-z0-9+/]/g, ''), 'base64').toString('latin1')).not.toContain(TOKEN.slice(4, 20));
  }
  expect(redactSecret('nothing to hide here', TOKEN)).toBe('nothing to hide here');
  expect(redactSecret(`x${TOKEN}`, undefined)).toBe(`x${TOKEN}`);
});

test('with maxLength the cut comes after redaction: a secret straddling it leaves no prefix behind', () => {
  const text = `${'a'.repeat(490)} ${TOKEN} and more`;
  const out = redactSecret(text, TOKEN, { maxLength: 500 });
  expect(out.length).toBeLessThanOrEqual(500);
  expect(out).not.toContain(TOKEN.slice(0, 9));
  expect(out).toMatch(/a \[redacted/);
});

test('a secret of thousands of characters is redacted too (no regex is built from it)', () => {
  // Credentials take secrets of up to 8 KiB; a provider error echoing one must not fail the request (it was a 500:
  // a regex built from the secret was too large). Its speed is not timed here: a timed unit test fails on a busy machine.
  const long = 'Ab0+'.repeat(2048);
  const out = redactSecret(`HTTP 400: token ${long} and hex ${Buffer.from(long).toString('hex')} end`, long);
  expect(out).toBe('HTTP 400: token [redacted] and hex [redacted] end');
  expect(redactSecret('0'.repeat(100_000), '0'.repeat(8192))).toMatch(/^(\[redacted\])+0*$/);
});

test('leftmost first, the longest form where two start together; whitespace inside a match goes with it', () => {
  expect(redactSecret('a  secret-token-1 b', 'secret-token-1')).toBe('a  [redacted] b');
  expect(redactSecret('x s e c r e t - t o k e n - 1 y', 'secret-token-1')).toBe('x [redacted] y');
});
