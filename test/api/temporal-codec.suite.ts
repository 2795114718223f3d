// The Temporal UI/CLI remote codec endpoint: the operator token, CORS for the UI's origin only, off without a token.
import { randomBytes } from 'node:crypto';
import { defaultPayloadConverter } from '@temporalio/common';
import { redactUrl } from '../../api/logging';
import { ENCODING_ENCRYPTED } from '../../lib/crypto/payload-codec';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { startTestApp, type TestApp } from '../support/app';

const TOKEN = randomBytes(32).toString('hex');
const UI = 'http://127.0.0.1:8233';
let db: TestDatabase;
let t: TestApp;
let off: TestApp;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, config: { TEMPORAL_CODEC_TOKEN: TOKEN, TEMPORAL_UI_ORIGIN: [UI, 'http://localhost:8233'] } });
  off = await startTestApp({ orm: db.orm, databaseUrl: db.url });
}, 60_000);
afterAll(async () => {
  await off.close();
  await t.close();
  await db.drop();
});

const TEXT = 'please ship to 42 Secret Lane';
/** A payload in the protocol's protobuf JSON (base64 metadata values and data). */
const jsonPayload = (v: unknown) => {
  const p = defaultPayloadConverter.toPayload(v)!;
  return {
    metadata: Object.fromEntries(Object.entries(p.metadata!).map(([k, b]) => [k, Buffer.from(b).toString('base64')])),
    data: Buffer.from(p.data!).toString('base64'),
  };
};
const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');
const post = (app: TestApp, op: string, payload: object, headers: Record<string, string> = {}) =>
  app.app.inject({ method: 'POST', url: `/api/temporal-codec/${op}`, headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers }, payload });
const auth = { authorization: `Bearer ${TOKEN}` };

test('with the token: /encode encrypts, /decode gives the original payload back (the UI protocol, protobuf JSON)', async () => {
  const enc = await post(t, 'encode', { payloads: [jsonPayload({ text: TEXT })] }, auth);
  expect(enc.statusCode).toBe(200);
  const [sealed] = enc.json().payloads;
  expect(b64(sealed.metadata.encoding)).toBe(ENCODING_ENCRYPTED);
  expect(b64(sealed.metadata['encryption-key-id'])).toMatch(/^g1-[0-9a-f]{12}$/);
  expect(b64(sealed.data)).not.toContain('Secret Lane');
  const plain = jsonPayload('already plain');
  const dec = await post(t, 'decode', { payloads: [sealed, plain] }, auth);
  expect(dec.statusCode).toBe(200);
  expect(dec.json().payloads).toEqual([jsonPayload({ text: TEXT }), plain]);
});

test('the token also works as the path segment before /decode (browser UIs cannot add a header); the logs redact it', async () => {
  const enc = (await post(t, 'encode', { payloads: [jsonPayload(TEXT)] }, auth)).json();
  const dec = await post(t, `${TOKEN}/decode`, enc);
  expect(dec.statusCode).toBe(200);
  expect(dec.json().payloads).toEqual([jsonPayload(TEXT)]);
  expect((await post(t, `${'0'.repeat(64)}/decode`, enc)).statusCode).toBe(401);
  expect(redactUrl(`/api/temporal-codec/${TOKEN}/decode`)).toBe('/api/temporal-codec/[redacted]/decode');
  expect(redactUrl('/api/temporal-codec/decode')).toBe('/api/temporal-codec/decode');
});

test('without the token, or with a wrong one: 401 invalid_codec_token, nothing decoded', async () => {
  const enc = (await post(t, 'encode', { payloads: [jsonPayload(TEXT)] }, auth)).json();
  for (const headers of [{} as Record<string, string>, { authorization: 'Bearer wrong' }, { authorization: `Basic ${TOKEN}` }, { authorization: `Bearer ${TOKEN}x` }]) {
    const res = await post(t, 'decode', enc, headers);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'invalid_codec_token', message: expect.stringContaining('TEMPORAL_CODEC_TOKEN') });
    expect(res.headers['www-authenticate']).toBe('Bearer');
    expect(res.body).not.toContain('Secret Lane');
  }
  expect((await post(t, 'encode', { payloads: [jsonPayload(TEXT)] })).statusCode).toBe(401);
});

test('no TEMPORAL_CODEC_TOKEN configured: the endpoint is off (404 with the reason)', async () => {
  const res = await post(off, 'decode', { payloads: [] }, auth);
  expect(res.statusCode).toBe(404);
  expect(res.json()).toEqual({ error: 'not_found', message: expect.stringContaining('TEMPORAL_CODEC_TOKEN') });
});

test('CORS: the preflight and the answer allow the Temporal UI origin only', async () => {
  const preflight = (origin: string) =>
    t.app.inject({
      method: 'OPTIONS',
      url: '/api/temporal-codec/decode',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-namespace' },
    });
  const ok = await preflight(UI);
  expect(ok.statusCode).toBe(204);
  expect(ok.headers['access-control-allow-origin']).toBe(UI);
  expect(String(ok.headers['access-control-allow-headers']).toLowerCase()).toEqual(expect.stringContaining('authorization'));
  expect(String(ok.headers['access-control-allow-headers']).toLowerCase()).toEqual(expect.stringContaining('x-namespace'));
  expect(ok.headers['access-control-allow-methods']).toBe('POST');
  const evil = await preflight('https://evil.example');
  expect(evil.headers['access-control-allow-origin']).toBeUndefined();
  expect((await preflight('http://127.0.0.1:8234')).headers['access-control-allow-origin']).toBeUndefined();

  const enc = (await post(t, 'encode', { payloads: [jsonPayload(TEXT)] }, auth)).json();
  expect((await post(t, 'decode', enc, { ...auth, origin: UI })).headers['access-control-allow-origin']).toBe(UI);
  expect((await post(t, 'decode', enc, { ...auth, origin: 'https://evil.example' })).headers['access-control-allow-origin']).toBeUndefined();
  // The widget's CORS (any origin) does not leak onto this path.
  expect((await post(t, 'decode', enc, { ...auth, origin: 'https://shop.example' })).headers['access-control-allow-origin']).toBeUndefined();
});

test('a body that is not the protocol: 400 naming the field; an undecodable payload: 400 naming its index', async () => {
  const bad = await post(t, 'decode', { payloads: [{ data: 'not base64!' }] }, auth);
  expect(bad.statusCode).toBe(400);
  expect(bad.json()).toEqual({ error: 'invalid_request', message: expect.stringContaining('payloads') });
  const enc = (await post(t, 'encode', { payloads: [jsonPayload(TEXT)] }, auth)).json();
  const forged = { ...enc.payloads[0], data: Buffer.from(randomBytes(40)).toString('base64') };
  const res = await post(t, 'decode', { payloads: [jsonPayload('x'), forged] }, auth);
  expect(res.statusCode).toBe(400);
  expect(res.json()).toEqual({ error: 'undecodable_payload', message: expect.stringMatching(/^payloads\[1\]: /) });
});
