import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stand-in for our webhook endpoint, for tests and demos: records every request's raw
 * bytes and headers and answers with a configurable status. With `verifyToken` it also
 * answers Meta's verification handshake (GET with hub.* parameters).
 */

export interface RecordedHit {
  method: string;
  /** Path and query. */
  url: string;
  headers: http.IncomingHttpHeaders;
  rawBody: Buffer;
  at: Date;
}

export interface WebhookRecorder {
  url: string;
  hits: RecordedHit[];
  /** POSTs only. */
  posts(): RecordedHit[];
  /** Statuses to answer the next POSTs with, in order; then 200. */
  respondWith(...statuses: number[]): void;
  /** Resolves with the POSTs once `predicate` holds for them; rejects after `timeoutMs`. */
  waitFor(predicate: number | ((posts: RecordedHit[]) => boolean), timeoutMs?: number): Promise<RecordedHit[]>;
  close(): Promise<void>;
}

export async function startWebhookRecorder(opts: { host?: string; port?: number; verifyToken?: string; path?: string } = {}): Promise<WebhookRecorder> {
  const hits: RecordedHit[] = [];
  const queued: number[] = [];
  const waiters = new Set<() => void>();
  const posts = () => hits.filter((h) => h.method === 'POST');

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, rawBody: Buffer.concat(chunks), at: new Date() });
      if (req.method === 'GET') {
        const q = new URL(req.url ?? '/', 'http://x').searchParams;
        const ok = opts.verifyToken !== undefined && q.get('hub.mode') === 'subscribe' && q.get('hub.verify_token') === opts.verifyToken;
        res.writeHead(ok ? 200 : 403, { 'Content-Type': 'text/plain' }).end(ok ? (q.get('hub.challenge') ?? '') : 'forbidden');
      } else {
        res.writeHead(queued.shift() ?? 200, { 'Content-Type': 'text/plain' }).end('ok');
      }
      for (const w of [...waiters]) w();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = opts.host ?? '127.0.0.1';

  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}${opts.path ?? '/webhooks/msgapp'}`,
    hits,
    posts,
    respondWith(...statuses) {
      queued.push(...statuses);
    },
    waitFor(predicate, timeoutMs = 5_000) {
      const test = typeof predicate === 'number' ? (p: RecordedHit[]) => p.length >= predicate : predicate;
      return new Promise<RecordedHit[]>((resolve, reject) => {
        const check = () => {
          if (!test(posts())) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(posts());
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`waitFor: condition not met within ${timeoutMs} ms (${posts().length} POSTs recorded)`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close() {
      return new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
}
