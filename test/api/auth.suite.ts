import Fastify from 'fastify';
import { authPlugin } from '../../api/plugins/auth';
import { ALL_SCOPES, type Scope } from '../../domain/keys/scopes';
import { createRequestLimits } from '../../lib/ratelimit';
import { createTestDatabase, type TestDatabase } from '../support/db';
import { bearer, createKey, createWorkspace, startTestApp, type TestApp } from '../support/app';

let db: TestDatabase;
let t: TestApp;
let ws: string;

beforeAll(async () => {
  db = await createTestDatabase();
  t = await startTestApp({ orm: db.orm, databaseUrl: db.url, perKey: 3, perWorkspace: 1000, windowSeconds: 60 });
  ws = await createWorkspace(db.orm);
});
afterAll(async () => {
  await t.close();
  await db.drop();
});

const getFolders = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/api/v1/kb/folders', headers });

describe('authentication: the four checks in the spec’s order', () => {
  test.each([
    ['no Authorization header', {}],
    ['another scheme', { authorization: 'Basic c2tfOmFiYw==' }],
    ['Bearer with nothing', { authorization: 'Bearer ' }],
    ['no sk_ prefix', { authorization: `Bearer ${'a'.repeat(64)}` }],
    ['63 hex characters', { authorization: `Bearer sk_${'a'.repeat(63)}` }],
    ['65 hex characters', { authorization: `Bearer sk_${'a'.repeat(65)}` }],
    ['non-hex characters', { authorization: `Bearer sk_${'g'.repeat(64)}` }],
    ['two tokens', { authorization: `Bearer sk_${'a'.repeat(64)} sk_${'b'.repeat(64)}` }],
    ['well-formed but unknown', { authorization: `Bearer sk_${'a'.repeat(64)}` }],
  ])('1. %s → 401 invalid_api_key', async (_name, headers) => {
    const res = await getFolders(headers as Record<string, string>);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'invalid_api_key', message: expect.any(String) });
    expect(res.headers['www-authenticate']).toBe('Bearer');
  });

  test('the scheme is case-insensitive', async () => {
    const { key } = await createKey(t.services, ws, ['kb:read']);
    expect((await getFolders({ authorization: `bearer ${key}` })).statusCode).toBe(200);
  });

  test('2. a deleted key → 401 revoked_api_key, even for a route it lacks the scope of', async () => {
    const { id, key } = await createKey(t.services, ws, ['kb:read']);
    expect((await getFolders(bearer(key))).statusCode).toBe(200);
    await t.services.apiKeys.delete(id);
    for (const res of [await getFolders(bearer(key)), await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: bearer(key), payload: { name: 'x' } })]) {
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'revoked_api_key', message: expect.any(String) });
    }
  });

  test('2. the old secret of a rotated key → 401 revoked_api_key; the new one works with the same scopes', async () => {
    const { id, key } = await createKey(t.services, ws, ['kb:read']);
    expect((await getFolders(bearer(key))).statusCode).toBe(200);
    const rotated = await t.services.apiKeys.rotate(id);
    expect(rotated.key).toMatch(/^sk_[0-9a-f]{64}$/);
    expect(rotated.key).not.toBe(key);
    const old = await getFolders(bearer(key));
    expect(old.statusCode).toBe(401);
    expect(old.json().error).toBe('revoked_api_key');
    expect((await getFolders(bearer(rotated.key))).statusCode).toBe(200);
    const write = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: bearer(rotated.key), payload: { name: 'x' } });
    expect(write.statusCode).toBe(403);
  });

  test('3. a key without the scope → 403 insufficient_scope naming it, before any rate limit', async () => {
    const { key } = await createKey(t.services, ws, ['kb:read']);
    // More requests than the per-key limit of 3: refusals by scope are not counted.
    for (let i = 0; i < 5; i++) {
      const res = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: bearer(key), payload: { name: `n${i}` } });
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({ error: 'insufficient_scope', message: expect.stringContaining("'kb:write'"), required_scope: 'kb:write' });
    }
    expect((await getFolders(bearer(key))).statusCode).toBe(200);
  });

  test('4. past the limit → 429 rate_limited with Retry-After and X-RateLimit-*; the check runs before the body is read', async () => {
    const { key } = await createKey(t.services, ws, ['kb:read', 'kb:write']);
    const ok = await getFolders(bearer(key));
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-ratelimit-limit']).toBe('3');
    expect(ok.headers['x-ratelimit-remaining']).toBe('2');
    expect(Number(ok.headers['x-ratelimit-reset'])).toBeGreaterThan(Date.now() / 1000);
    await getFolders(bearer(key));
    await getFolders(bearer(key));
    // A malformed body from a limited key gets the 429, not a 400: checks precede parsing.
    const limited = await t.app.inject({ method: 'POST', url: '/api/v1/kb/folders', headers: { ...bearer(key), 'content-type': 'application/json' }, payload: '{bad' });
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toEqual({ error: 'rate_limited', message: expect.any(String) });
    const retryAfter = Number(limited.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    expect(limited.headers['x-ratelimit-limit']).toBe('3');
  });

  test('the OpenAPI document and health check need no key', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('deny by default', () => {
  test('every registered route demands its scope: a key holding every other scope gets 403', async () => {
    // The console's own routes answer to a session, never a key (test/api/console-auth.suite.ts).
    const guarded = t.app.routeTable.filter((r) => !r.public && !r.console);
    expect(guarded.length).toBeGreaterThanOrEqual(4);
    // Public means not key-authenticated: the provider webhook is checked by signature, media links by their MAC,
    // the widget reply socket by site id, Origin and conversation at its handshake.
    expect([...new Set(t.app.routeTable.filter((r) => r.public && !r.site).map((r) => r.url))].sort()).toEqual([
      '/api/chat/connect',
      '/api/media/:token',
      // The Temporal UI's codec endpoint: the operator token (TEMPORAL_CODEC_TOKEN), in the path or as a bearer, not an API key.
      '/api/temporal-codec/:token/decode',
      '/api/temporal-codec/:token/encode',
      '/api/temporal-codec/decode',
      '/api/temporal-codec/encode',
      '/api/v1/openapi.json',
      '/api/voice/rtc',
      // The console's web app: static files (api/routes/console-assets.ts); its data comes through /api/console/ and /api/v1.
      '/console',
      '/console/*',
      '/demo',
      '/demo.js',
      '/healthz',
      // Prometheus metrics: the operator token (METRICS_TOKEN) as a bearer, not an API key; 404 while it is unset.
      '/metrics',
      '/webhooks/msgapp',
      '/widget.js',
      // The versioned widget scripts (a content hash in the path; anything else under it is 404).
      '/widget/:version/:name',
      '/widget/livekit-client.js',
    ]);
    // Widget routes answer to site id + Origin instead; every one of them is under /api/public/widget.
    expect(t.app.routeTable.filter((r) => r.site).every((r) => r.url.startsWith('/api/public/widget/'))).toBe(true);
    const keys = new Map<string, string>();
    for (const route of guarded) {
      const scope = route.scope as Scope;
      if (!keys.has(scope)) keys.set(scope, (await createKey(t.services, ws, ALL_SCOPES.filter((s) => s !== scope))).key);
      const url = route.url.replace(/:(\w+)/g, 'x_$1');
      const res = await t.app.inject({ method: route.method as 'GET', url, headers: bearer(keys.get(scope)!), payload: route.method === 'GET' || route.method === 'HEAD' ? undefined : {} });
      expect({ route: `${route.method} ${route.url}`, status: res.statusCode }).toEqual({ route: `${route.method} ${route.url}`, status: 403 });
      if (route.method !== 'HEAD') expect(res.json()).toMatchObject({ error: 'insufficient_scope', required_scope: scope });
    }
  });

  test('a route that declares no scope cannot be registered', async () => {
    const app = Fastify();
    await app.register(authPlugin, { apiKeys: t.services.apiKeys, limits: await createRequestLimits({ kind: 'memory' }, 1, 1) });
    expect(() => app.get('/api/v1/unguarded', async () => ({ leaked: true }))).toThrow(/declares no scope/);
    expect(() => app.post('/api/v1/guarded', { config: { scope: 'kb:write' } }, async () => ({}))).not.toThrow();
    await app.close();
  });
});
