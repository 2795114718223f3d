import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { webDir, widgetAssetRoutes } from '../../api/routes/widget-assets';
import { startTestApp } from '../support/app';
import { createTestDatabase } from '../support/db';

/** A CSP header as directive → sources. */
function directives(csp: string): Record<string, string[]> {
  return Object.fromEntries(csp.split(';').map((d) => d.trim().split(/\s+/)).filter((d) => d[0]).map(([name, ...sources]) => [name, sources]));
}

/** The static files the widget needs: itself, and LiveKit's browser SDK for calls on transport 'livekit'. */
describe('widget assets', () => {
  test("GET /widget/livekit-client.js serves livekit-client's UMD build (global LivekitClient) as JavaScript", async () => {
    const app = Fastify();
    await app.register(widgetAssetRoutes);
    try {
      const res = await app.inject({ method: 'GET', url: '/widget/livekit-client.js' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/javascript; charset=utf-8');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.body).toBe(fs.readFileSync(require.resolve('livekit-client'), 'utf8'));
      // The UMD wrapper that defines the global the widget reads.
      expect(res.body.slice(0, 400)).toContain('.LivekitClient={}');
    } finally {
      await app.close();
    }
  });

  test("GET /demo: a strict Content-Security-Policy (scripts from this origin only, nothing inline, never framed) and nosniff; its script is /demo.js", async () => {
    const app = Fastify();
    await app.register(widgetAssetRoutes);
    try {
      const res = await app.inject({ method: 'GET', url: '/demo?site_id=site_x' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['x-frame-options']).toBe('DENY');
      const csp = directives(String(res.headers['content-security-policy']));
      expect(csp).toMatchObject({ 'default-src': ["'none'"], 'script-src': ["'self'"], 'object-src': ["'none'"], 'base-uri': ["'none'"], 'frame-ancestors': ["'none'"] });
      // The page needs no inline script: every <script> it has names a source on this origin.
      const scripts = [...res.body.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
      expect(scripts.map((m) => [m[1].trim(), m[2].trim()])).toEqual([['src="/demo.js"', '']]);

      const js = await app.inject({ method: 'GET', url: '/demo.js' });
      expect(js.statusCode).toBe(200);
      expect(js.headers['content-type']).toBe('application/javascript; charset=utf-8');
      expect(js.headers['x-content-type-options']).toBe('nosniff');
      expect(js.body).toContain("s.src = '/widget.js'");
    } finally {
      await app.close();
    }
  });

  describe('compressed, with a versioned URL', () => {
    let app: FastifyInstance;
    const file = fs.readFileSync(path.join(webDir(), 'widget.js'));
    const hash = createHash('sha256').update(file).digest('hex').slice(0, 16);
    beforeAll(async () => {
      app = Fastify();
      await app.register(widgetAssetRoutes);
    });
    afterAll(() => app.close());
    const get = (url: string, headers: Record<string, string> = {}) => app.inject({ method: 'GET', url, headers });

    test('GET /widget.js: the file as-is without Accept-Encoding, a 5-minute cache, an ETag, Vary, nosniff, and its versioned URL named in headers', async () => {
      const res = await get('/widget.js');
      expect(res.statusCode).toBe(200);
      expect(res.rawPayload.equals(file)).toBe(true);
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(res.headers['content-type']).toBe('application/javascript; charset=utf-8');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['cache-control']).toBe('public, max-age=300');
      expect(res.headers.vary).toBe('Accept-Encoding');
      expect(res.headers.etag).toBe(`"${hash}"`);
      expect(res.headers['x-concierge-widget-version']).toBe(hash);
      expect(res.headers.link).toBe(`</widget/${hash}/widget.js>; rel="alternate"; type="application/javascript"`);
    });

    test('brotli when accepted (preferred), else gzip; the bytes decompress to the file; q=0 refuses a coding', async () => {
      const br = await get('/widget.js', { 'accept-encoding': 'gzip, deflate, br' });
      expect(br.headers['content-encoding']).toBe('br');
      expect(br.headers.vary).toBe('Accept-Encoding');
      expect(br.headers.etag).toBe(`"${hash}-br"`);
      expect(zlib.brotliDecompressSync(br.rawPayload).equals(file)).toBe(true);
      // Compressed for real: well under half the size.
      expect(br.rawPayload.length).toBeLessThan(file.length / 2);

      const gz = await get('/widget.js', { 'accept-encoding': 'gzip' });
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(gz.headers.etag).toBe(`"${hash}-gz"`);
      expect(zlib.gunzipSync(gz.rawPayload).equals(file)).toBe(true);
      expect(gz.rawPayload.length).toBeLessThan(file.length / 2);

      expect((await get('/widget.js', { 'accept-encoding': 'br;q=0, gzip;q=0.5' })).headers['content-encoding']).toBe('gzip');
      expect((await get('/widget.js', { 'accept-encoding': '*' })).headers['content-encoding']).toBe('br');
      const identity = await get('/widget.js', { 'accept-encoding': 'identity, br;q=0, gzip;q=0' });
      expect(identity.headers['content-encoding']).toBeUndefined();
      expect(identity.rawPayload.equals(file)).toBe(true);
      // The second request is served from the bytes kept (the same bytes).
      expect((await get('/widget.js', { 'accept-encoding': 'br' })).rawPayload.equals(br.rawPayload)).toBe(true);
    });

    test('the plain URL answers 304 without a body when If-None-Match names the representation asked for; a stale tag gets the bytes', async () => {
      const first = await get('/widget.js', { 'accept-encoding': 'gzip' });
      const again = await get('/widget.js', { 'accept-encoding': 'gzip', 'if-none-match': String(first.headers.etag) });
      expect(again.statusCode).toBe(304);
      expect(again.rawPayload.length).toBe(0);
      expect(again.headers.etag).toBe(first.headers.etag);
      expect(again.headers['cache-control']).toBe('public, max-age=300');
      expect(again.headers.vary).toBe('Accept-Encoding');
      // Weak form and lists match too; the identity tag does not stand for the gzip bytes.
      expect((await get('/widget.js', { 'if-none-match': `"other", W/"${hash}"` })).statusCode).toBe(304);
      expect((await get('/widget.js', { 'accept-encoding': 'gzip', 'if-none-match': `"${hash}"` })).statusCode).toBe(200);
      const stale = await get('/widget.js', { 'if-none-match': '"0000000000000000"' });
      expect(stale.statusCode).toBe(200);
      expect(stale.rawPayload.equals(file)).toBe(true);
    });

    test('/widget/<hash>/widget.js: the same bytes, compressed, cached a year and immutable; an older version redirects to the current; anything else is 404', async () => {
      const res = await get(`/widget/${hash}/widget.js`, { 'accept-encoding': 'br' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(res.headers['content-type']).toBe('application/javascript; charset=utf-8');
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers.vary).toBe('Accept-Encoding');
      expect(zlib.brotliDecompressSync(res.rawPayload).equals(file)).toBe(true);
      expect((await get(`/widget/${hash}/widget.js`)).rawPayload.equals(file)).toBe(true);

      const old = await get('/widget/0123456789abcdef/widget.js');
      expect(old.statusCode).toBe(302);
      expect(old.headers.location).toBe(`/widget/${hash}/widget.js`);
      expect(old.headers['cache-control']).toBe('no-cache');
      for (const url of [`/widget/${hash}/demo.html`, `/widget/${hash}/constructor`, '/widget/not-a-hash/widget.js', `/widget/${hash.toUpperCase()}/widget.js`]) {
        const res404 = await get(url);
        expect(res404.statusCode).toBe(404);
        expect(res404.json().error).toBe('not_found');
      }
    });

    test('through the whole app (auth, error handling, request ids): no key needed, the versioned URL and a 304 answer as above', async () => {
      const db = await createTestDatabase();
      const t = await startTestApp({ orm: db.orm, databaseUrl: db.url });
      try {
        const plain = await t.app.inject({ method: 'GET', url: '/widget.js', headers: { 'accept-encoding': 'br' } });
        expect(plain.statusCode).toBe(200);
        expect(zlib.brotliDecompressSync(plain.rawPayload).equals(file)).toBe(true);
        const pinned = await t.app.inject({ method: 'GET', url: `/widget/${plain.headers['x-concierge-widget-version']}/widget.js` });
        expect(pinned.statusCode).toBe(200);
        expect(pinned.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        expect(pinned.rawPayload.equals(file)).toBe(true);
        const cached = await t.app.inject({ method: 'GET', url: '/widget.js', headers: { 'accept-encoding': 'br', 'if-none-match': String(plain.headers.etag) } });
        expect(cached.statusCode).toBe(304);
        expect((await t.app.inject({ method: 'GET', url: '/widget/0123456789abcdef/widget.js' })).statusCode).toBe(302);
      } finally {
        await t.close();
        await db.drop();
      }
    });

    test("LiveKit's SDK has a versioned, immutable URL too, and is compressed", async () => {
      const sdk = fs.readFileSync(require.resolve('livekit-client'));
      const v = createHash('sha256').update(sdk).digest('hex').slice(0, 16);
      const res = await get(`/widget/${v}/livekit-client.js`, { 'accept-encoding': 'gzip' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(zlib.gunzipSync(res.rawPayload).equals(sdk)).toBe(true);
      const plain = await get('/widget/livekit-client.js', { 'accept-encoding': 'br' });
      expect(plain.headers['content-encoding']).toBe('br');
      expect(plain.headers.etag).toBe(`"${v}-br"`);
      expect(zlib.brotliDecompressSync(plain.rawPayload).equals(sdk)).toBe(true);
    });
  });
});
