import fs from 'node:fs';
import path from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { CompressedAsset } from '../compressed-asset';
import { IMMUTABLE } from './widget-assets';

/**
 * The console's policy. Everything the page loads is this origin's (the built script and stylesheet, the API it calls),
 * so `default-src 'self'`, spelled out per kind; no inline script or style (Vite inlines nothing, see
 * console/vite.config.mjs; React's style props set the CSSOM, which style-src does not govern), no eval, no plugins,
 * no <base>, no form posts (forms are sent by script), never framed (clickjacking).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The built console (scripts/console-build.ts): console/dist in the nearest folder above this file holding the
 * console's sources (a checkout, from source or compiled to dist/) or its build alone (the Docker image).
 */
export function consoleDistDir(from = __dirname): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'console', 'index.html')) || fs.existsSync(path.join(dir, 'console', 'dist', 'index.html'))) return path.join(dir, 'console', 'dist');
    if (path.dirname(dir) === dir) return path.resolve(__dirname, '../../console/dist');
  }
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'application/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.woff2': 'font/woff2',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The build's files, read when first asked for and read again when the file changes (a rebuild under a running
 * server: index.html keeps its name), each compressed once per encoding (CompressedAsset: brotli or gzip, ETag, 304).
 * Not @fastify/static: its content-disposition dependency is an ES module, which Jest's module loader cannot require
 * on Node 20, and every API test builds this app; the widget's CompressedAsset already does what the console needs.
 */
class BuiltFiles {
  private readonly cache = new Map<string, { mtimeMs: number; size: number; asset: CompressedAsset }>();

  constructor(readonly dir: string) {}

  /** The file at `relative` inside the folder (never outside it, never a dotfile), or null. */
  get(relative: string): CompressedAsset | null {
    const file = path.resolve(this.dir, relative);
    if (!file.startsWith(this.dir + path.sep) || path.basename(file).startsWith('.')) return null;
    const stat = fs.statSync(file, { throwIfNoEntry: false });
    if (!stat?.isFile()) return null;
    const cached = this.cache.get(file);
    if (cached && cached.mtimeMs === stat.mtimeMs && cached.size === stat.size) return cached.asset;
    const asset = new CompressedAsset(fs.readFileSync(file), TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream');
    this.cache.set(file, { mtimeMs: stat.mtimeMs, size: stat.size, asset });
    return asset;
  }
}

/**
 * The console's web app at /console/: hashed assets under /console/assets/ (a year, immutable: a new build names new
 * files), and index.html (no-cache: revalidated every time, so a new build reaches people at once) for /console/
 * and every other path below it, the app's own pages. Without a build, 503 `console_not_built`.
 */
export const consoleAssetRoutes: FastifyPluginAsyncZod<{ distDir?: string }> = async (app, opts) => {
  const files = new BuiltFiles(path.resolve(opts.distDir ?? consoleDistDir()));

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    // The referrer stays on this origin: a one-time link's token is in its path.
    reply.header('X-Content-Type-Options', 'nosniff').header('Referrer-Policy', 'same-origin');
    const index = files.get('index.html');
    if (!index) {
      return reply.code(503).header('Cache-Control', 'no-store').send({ error: 'console_not_built', message: 'The console is not built: run npm run build' });
    }
    const rest = ((request.params as { '*'?: string })['*'] ?? '').replace(/^\/+/, '');
    if (rest.startsWith('assets/')) {
      const asset = files.get(rest);
      if (!asset) return reply.code(404).header('Cache-Control', 'no-store').send({ error: 'not_found', message: `No console asset named '${rest.slice(0, 100)}'` });
      return asset.send(request, reply, IMMUTABLE);
    }
    reply
      .header('Content-Security-Policy', CONSOLE_CSP)
      // For browsers without frame-ancestors.
      .header('X-Frame-Options', 'DENY')
      .header('Cross-Origin-Opener-Policy', 'same-origin');
    return index.send(request, reply, 'no-cache');
  };

  app.get('/console', { config: { public: true }, schema: { hide: true }, handler });
  app.get('/console/*', { config: { public: true }, schema: { hide: true }, handler });
};
