import fs from 'node:fs';
import Fastify from 'fastify';
import { widgetAssetRoutes } from '../../api/routes/widget-assets';

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
});
