import fs from 'node:fs';
import path from 'node:path';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { CompressedAsset } from '../compressed-asset';

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

const JS = 'application/javascript; charset=utf-8';
/** A versioned URL names its bytes forever: browsers and CDNs keep it a year and never revalidate. */
export const IMMUTABLE = 'public, max-age=31536000, immutable';
/** The plain URLs: sites embed them unversioned, so a new release must reach them within minutes (then a 304 when unchanged). */
export const SHORT = 'public, max-age=300';
const VERSION = /^[0-9a-f]{16}$/;

/** The path that serves exactly these bytes of `name` for a year. */
export const versionedPath = (asset: CompressedAsset, name: string) => `/widget/${asset.hash}/${name}`;

/**
 * The prebuilt chat widget script, its demo page and the LiveKit SDK it may load, read once at start.
 * Each script is served at its plain URL (short cache, ETag) and at a versioned one,
 * `/widget/<first 16 hex digits of its SHA-256>/<name>` (cached for a year, immutable), brotli- or
 * gzip-compressed when the client accepts it. The plain /widget.js names its versioned URL in
 * `X-Concierge-Widget-Version` and a `Link` header, so a site owner can pin it.
 */
export const widgetAssetRoutes: FastifyPluginAsyncZod = async (app) => {
  const dir = webDir();
  const demo = fs.readFileSync(path.join(dir, 'demo.html'));
  const demoScript = fs.readFileSync(path.join(dir, 'demo.js'));
  const assets = {
    'widget.js': new CompressedAsset(fs.readFileSync(path.join(dir, 'widget.js')), JS),
    // LiveKit's browser SDK (UMD build, global `LivekitClient`): the widget fetches it only when a
    // call runs on transport 'livekit', so pages that never call never pay its ~600 KB (~150 KB as brotli).
    'livekit-client.js': new CompressedAsset(fs.readFileSync(require.resolve('livekit-client')), JS),
  };
  const widget = assets['widget.js'];

  app.get('/widget.js', {
    config: { public: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      const pinned = versionedPath(widget, 'widget.js');
      reply.header('X-Concierge-Widget-Version', widget.hash).header('Link', `<${pinned}>; rel="alternate"; type="application/javascript"`);
      return widget.send(request, reply, SHORT);
    },
  });

  app.get('/widget/livekit-client.js', {
    config: { public: true },
    schema: { hide: true },
    // Changes only with the livekit-client package: an hour, then a 304.
    handler: async (request, reply) => assets['livekit-client.js'].send(request, reply, 'public, max-age=3600'),
  });

  app.get<{ Params: { version: string; name: string } }>('/widget/:version/:name', {
    config: { public: true },
    schema: { hide: true },
    handler: async (request, reply) => {
      const { version, name } = request.params;
      const asset = Object.hasOwn(assets, name) ? assets[name as keyof typeof assets] : undefined;
      if (!asset || !VERSION.test(version)) return reply.code(404).send({ error: 'not_found', message: `No widget asset named '${name.slice(0, 100)}' at version '${version.slice(0, 100)}'` });
      if (version === asset.hash) return asset.send(request, reply, IMMUTABLE);
      // A version this release does not have (a page pinned before an upgrade): the current one, never under the
      // old name's year-long cache (that URL must keep meaning other bytes), so the page keeps working.
      return reply.code(302).header('Cache-Control', 'no-cache').header('Location', versionedPath(asset, name)).send();
    },
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
