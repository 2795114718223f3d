import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { pipeline, Readable, Transform } from 'node:stream';
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
 *
 * A body is read up to `maxBytes` (default DEFAULT_MAX_RESPONSE_BYTES): a larger
 * Content-Length rejects the call before the body is read, and a body that grows past the
 * cap errors its stream with ResponseTooLargeError and closes the socket, so a provider
 * answering hundreds of megabytes costs at most the cap in memory.
 */
export function pinnedFetch(addresses: string[], opts: { ca?: string | Buffer | Array<string | Buffer>; maxBytes?: number } = {}): typeof fetch {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
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
          const declared = Number(res.headers['content-length'] ?? NaN);
          if (!empty && declared > maxBytes) {
            res.destroy();
            reject(new ResponseTooLargeError(maxBytes));
            return;
          }
          const stream = empty ? null : (Readable.toWeb(capped(res, maxBytes)) as WebReadableStream as unknown as ReadableStream);
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

/** What a provider's answer may weigh when the caller names no limit: above any listing or tool result we read. */
export const DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

export class ResponseTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the response is larger than ${limit} bytes (the limit for a provider's answer); it was not read further`);
    this.name = 'ResponseTooLargeError';
  }
}

/** `res` passed on until `maxBytes`; one byte more errors the stream and destroys the response (and its socket). */
function capped(res: http.IncomingMessage, maxBytes: number): Readable {
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      callback(seen > maxBytes ? new ResponseTooLargeError(maxBytes) : null, seen > maxBytes ? undefined : chunk);
    },
  });
  // On the counter's error pipeline destroys `res`: the socket closes and nothing more is read.
  pipeline(res, counter, () => undefined);
  return counter;
}

/**
 * `inner` (e.g. the global fetch) with every response body capped at `maxBytes`: the same
 * ResponseTooLargeError, and the body's source cancelled (the connection closed) past it.
 */
export function cappedFetch(inner: typeof fetch, maxBytes: number): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const res = await inner(input, init);
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > maxBytes) {
      await res.body?.cancel().catch(() => undefined);
      throw new ResponseTooLargeError(maxBytes);
    }
    if (!res.body) return res;
    const reader = res.body.getReader();
    let seen = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) return controller.close();
        seen += value.byteLength;
        if (seen > maxBytes) {
          await reader.cancel().catch(() => undefined);
          return controller.error(new ResponseTooLargeError(maxBytes));
        }
        controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  }) as typeof fetch;
}
