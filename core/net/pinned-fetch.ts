import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { pinnedLookup } from './safe-http';
import { hostOf } from './ssrf';

/**
 * A `fetch` for a client library (the OpenAI SDK's `fetch` option) whose every connection
 * goes to addresses already checked by the SSRF policy (`checkProviderUrl`), whatever the
 * name resolves to by then (DNS rebinding). TLS still verifies the certificate against
 * the name. A fresh socket per request (`agent: false`, no proxy); redirects are returned
 * as they are, never followed to an unchecked host; bodies arrive uncompressed
 * (`accept-encoding: identity`), as fetch's callers expect decoded bytes.
 */
export function pinnedFetch(addresses: string[], opts: { ca?: string | Buffer | Array<string | Buffer> } = {}): typeof fetch {
  if (addresses.length === 0) throw new Error('pinnedFetch: no checked address');
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = (init.method ?? 'GET').toUpperCase();
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    headers['accept-encoding'] = 'identity';
    const body = init.body == null ? undefined : typeof init.body === 'string' ? init.body : Buffer.from(await new Response(init.body).arrayBuffer());
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    const host = hostOf(url);
    const secure = url.protocol === 'https:';
    return new Promise<Response>((resolve, reject) => {
      const req = (secure ? https : http).request(
        {
          method,
          protocol: url.protocol,
          hostname: host,
          port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
          path: `${url.pathname}${url.search}`,
          headers,
          agent: false,
          lookup: pinnedLookup(addresses),
          ...(secure ? { servername: isIP(host) ? undefined : host, ...(opts.ca ? { ca: opts.ca } : {}) } : {}),
        },
        (res) => {
          const out = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) out.append(res.rawHeaders[i], res.rawHeaders[i + 1]);
          const status = res.statusCode ?? 0;
          const empty = method === 'HEAD' || [101, 204, 205, 304].includes(status);
          if (empty) res.resume();
          const stream = empty ? null : (Readable.toWeb(res) as WebReadableStream as unknown as ReadableStream);
          resolve(new Response(stream, { status, statusText: res.statusMessage ?? '', headers: out }));
        },
      );
      const abort = () => req.destroy(signal?.reason instanceof Error ? signal.reason : new DOMException('This operation was aborted', 'AbortError'));
      signal?.addEventListener('abort', abort, { once: true });
      req.on('close', () => signal?.removeEventListener('abort', abort));
      req.on('error', reject);
      req.end(body);
    });
  }) as typeof fetch;
}
