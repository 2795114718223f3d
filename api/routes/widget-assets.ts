import fs from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';

/**
 * The folder holding the prebuilt widget: the nearest `web/` above this file, so the
 * lookup holds whether this runs from source (api/routes) or from a compiled tree.
 */
export function webDir(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'web', 'widget.js'))) return path.join(dir, 'web');
    if (path.dirname(dir) === dir) throw new Error(`web/widget.js not found above ${from}`);
  }
}

/**
 * The demo page's policy. It is served from the API's own origin, so script there could
 * call the API as that origin: scripts only from this origin (the page's own in /demo.js,
 * the widget, LiveKit's SDK), nothing inline, no eval, no plugins, no <base>, no forms,
 * and never framed (clickjacking). Styles may be inline: the widget writes its own into
 * its shadow root. Images from any https site (cards the agent sends name any image),
 * connections to this origin and to https/wss ones (the voice transport: this
 * installation's signalling socket, or LiveKit's server on another host).
 */
export const DEMO_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' https: data: blob:",
  "media-src 'self' blob: mediastream:",
  "connect-src 'self' https: wss:",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The prebuilt chat widget script, its demo page and the LiveKit SDK it may load, read once at start. */
export const widgetAssetRoutes: FastifyPluginAsyncZod = async (app) => {
  const dir = webDir();
  const widget = fs.readFileSync(path.join(dir, 'widget.js'));
  const demo = fs.readFileSync(path.join(dir, 'demo.html'));
  const demoScript = fs.readFileSync(path.join(dir, 'demo.js'));

  app.get('/widget.js', {
    config: { public: true },
    schema: { hide: true },
    handler: async (_request, reply) =>
      reply
        .type('application/javascript; charset=utf-8')
        // Short: sites embed this URL unversioned, so a new release must reach them soon.
        .header('Cache-Control', 'public, max-age=300')
        .header('X-Content-Type-Options', 'nosniff')
        .send(widget),
  });

  // LiveKit's browser SDK (UMD build, global `LivekitClient`): the widget fetches it only when a
  // call runs on transport 'livekit', so pages that never call never pay its ~600 KB.
  const livekit = fs.readFileSync(require.resolve('livekit-client'));
  app.get('/widget/livekit-client.js', {
    config: { public: true },
    schema: { hide: true },
    handler: async (_request, reply) =>
      reply
        .type('application/javascript; charset=utf-8')
        .header('Cache-Control', 'public, max-age=3600')
        .header('X-Content-Type-Options', 'nosniff')
        .send(livekit),
  });

  app.get('/demo', {
    config: { public: true },
    schema: { hide: true },
    handler: async (_request, reply) =>
      reply
        .type('text/html; charset=utf-8')
        .header('Cache-Control', 'no-cache')
        .header('Content-Security-Policy', DEMO_CSP)
        // For browsers without frame-ancestors.
        .header('X-Frame-Options', 'DENY')
        .header('X-Content-Type-Options', 'nosniff')
        .send(demo),
  });

  app.get('/demo.js', {
    config: { public: true },
    schema: { hide: true },
    handler: async (_request, reply) =>
      reply.type('application/javascript; charset=utf-8').header('Cache-Control', 'no-cache').header('X-Content-Type-Options', 'nosniff').send(demoScript),
  });
};
