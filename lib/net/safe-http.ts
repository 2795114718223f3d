import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { createHash } from 'node:crypto';
import tls from 'node:tls';
import { checkUrl, hostOf, UnsafeUrlError, type AddressPolicy, type Resolver } from './ssrf';

/**
 * The delivery-time HTTP client for webhooks: one POST, redirects followed by hand, every
 * hop checked by the SSRF policy before anything is sent to it.
 *
 * - Each hop's host is resolved once (`checkUrl`) and the socket is opened to exactly the
 *   addresses that check approved, through a `lookup` that returns them instead of asking
 *   DNS again. A name that re-resolves elsewhere between check and connect (DNS rebinding)
 *   therefore never changes where we connect.
 * - TLS still uses the name: `servername` (SNI) is the hostname and the certificate is
 *   verified against it, not against the IP.
 * - `agent: false`: a fresh socket per request, never a pooled one opened for another
 *   address, and never a proxy. Proxy environment variables are not read.
 * - One deadline for the whole call, redirects and DNS included.
 * - At most the first 1 KiB of a response body is read; then the response is destroyed.
 */

export interface SafePostOptions {
  headers: Record<string, string>;
  body: string | Buffer;
  timeoutMs: number;
  /** Redirects followed before giving up; default 5. */
  maxRedirects?: number;
  policy: AddressPolicy;
  resolve?: Resolver;
  /** Extra trusted CAs, appended to `tls.rootCertificates`. */
  ca?: string | Buffer | Array<string | Buffer>;
  userAgent?: string;
}

export interface SafePostResult {
  status: number;
  /** The first 1024 bytes of the response body, decoded as UTF-8. */
  body: string;
  /** The URL that gave the final (non-redirect) response. */
  url: string;
  latencyMs: number;
}

export type DeliveryErrorKind = 'unsafe_url' | 'transport' | 'timeout' | 'too_many_redirects';

export class DeliveryError extends Error {
  constructor(
    readonly kind: DeliveryErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'DeliveryError';
  }
}

export const DEFAULT_USER_AGENT = 'Concierge-Webhooks/1.0';
export const DEFAULT_MAX_REDIRECTS = 5;
export const MAX_RESPONSE_BODY_BYTES = 1024;

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Headers this client owns; the caller's spellings of them are dropped. */
const OWN_HEADERS = new Set(['content-length', 'transfer-encoding', 'host', 'connection', 'user-agent']);

interface HopResponse {
  status: number;
  location: string | undefined;
  body: string;
}

export async function safePost(url: string, opts: SafePostOptions): Promise<SafePostResult> {
  const started = performance.now();
  const deadline = started + opts.timeoutMs;
  const maxRedirects = opts.maxRedirects ?? DEFAULT_MAX_REDIRECTS;
  const body = typeof opts.body === 'string' ? Buffer.from(opts.body, 'utf8') : opts.body;
  const headers = buildHeaders(opts, body.length);
  const context = secureContextFor(opts.ca);

  let current = url;
  for (let redirects = 0; ; redirects++) {
    const checked = await withDeadline(deadline, opts.timeoutMs, checkUrl(current, opts.policy, opts.resolve)).catch((err: unknown) => {
      if (err instanceof UnsafeUrlError) {
        throw new DeliveryError('unsafe_url', redirects === 0 ? err.reason : `redirect refused: ${err.reason}`);
      }
      throw err;
    });
    const res = await sendOnce(checked.url, checked.addresses, { headers, body, context, deadline, timeoutMs: opts.timeoutMs });

    // Redirects are followed with the same POST, body and headers for every status,
    // 301/302/303 included. A webhook is a POST; turning it into a body-less GET (what
    // browsers do) would let a receiver answer 200 without ever seeing the event.
    if (REDIRECTS.has(res.status) && res.location !== undefined) {
      if (redirects >= maxRedirects) {
        throw new DeliveryError('too_many_redirects', `more than ${maxRedirects} redirects`);
      }
      try {
        current = new URL(res.location, checked.url).href;
      } catch {
        throw new DeliveryError('unsafe_url', 'redirect refused: Location does not parse as a URL');
      }
      continue;
    }
    return { status: res.status, body: res.body, url: checked.url.href, latencyMs: Math.round(performance.now() - started) };
  }
}

function buildHeaders(opts: SafePostOptions, length: number): Record<string, string> {
  const out: Record<string, string> = {};
  let callerAgent: string | undefined;
  for (const [name, value] of Object.entries(opts.headers)) {
    const lower = name.toLowerCase();
    if (lower === 'user-agent') callerAgent = value;
    if (!OWN_HEADERS.has(lower)) out[name] = value;
  }
  out['User-Agent'] = opts.userAgent ?? callerAgent ?? DEFAULT_USER_AGENT;
  out['Content-Length'] = String(length);
  return out;
}

const timeoutError = (timeoutMs: number) => new DeliveryError('timeout', `no response within ${timeoutMs} ms`);

/** Races `work` (which cannot be cancelled, e.g. a DNS lookup) against the call's deadline. */
function withDeadline<T>(deadline: number, timeoutMs: number, work: Promise<T>): Promise<T> {
  const remaining = deadline - performance.now();
  if (remaining <= 0) return Promise.reject(timeoutError(timeoutMs));
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(timeoutError(timeoutMs)), remaining);
    work.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** A `lookup` that answers with the addresses already checked, whatever name it is asked about. */
export function pinnedLookup(addresses: string[]): LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) {
      callback(null, addresses.map((address) => ({ address, family: isIP(address) })));
    } else {
      callback(null, addresses[0], isIP(addresses[0]));
    }
  };
}

/**
 * TLS state reused across deliveries, never across trust settings: one secure context per
 * `ca` setting (building one per connection costs more CPU than the handshake's own
 * checks), and the last session ticket per host, port, name and checked address, so a
 * repeat delivery resumes instead of a full handshake (the server proves it holds the
 * session's keys; the certificate was verified when the session was made).
 */
let defaultContext: { context: tls.SecureContext; key: string } | null = null;
const extraCaContexts = new Map<string, { context: tls.SecureContext; key: string }>();
/** Extra CAs (tests, self-hosted endpoints) are appended to `tls.rootCertificates`. */
function secureContextFor(extra: string | Buffer | Array<string | Buffer> | undefined): { context: tls.SecureContext; key: string } {
  if (extra === undefined) return (defaultContext ??= { context: tls.createSecureContext(), key: 'default' });
  const list = Array.isArray(extra) ? extra : [extra];
  const key = createHash('sha256')
    .update(list.map((c) => c.toString()).join('\n'))
    .digest('hex');
  let c = extraCaContexts.get(key);
  if (!c) {
    if (extraCaContexts.size >= 16) extraCaContexts.clear();
    extraCaContexts.set(key, (c = { context: tls.createSecureContext({ ca: [...tls.rootCertificates, ...list] }), key }));
  }
  return c;
}
const SESSION_CACHE_SIZE = 1_000;
const sessions = new Map<string, Buffer>();
function rememberSession(key: string, session: Buffer): void {
  sessions.delete(key);
  sessions.set(key, session);
  if (sessions.size > SESSION_CACHE_SIZE) sessions.delete(sessions.keys().next().value!);
}

function sendOnce(
  url: URL,
  addresses: string[],
  o: { headers: Record<string, string>; body: Buffer; context: { context: tls.SecureContext; key: string }; deadline: number; timeoutMs: number },
): Promise<HopResponse> {
  const remaining = o.deadline - performance.now();
  if (remaining <= 0) return Promise.reject(timeoutError(o.timeoutMs));
  const host = hostOf(url);
  const literal = isIP(host) !== 0;
  const sessionKey = `${host}|${url.port}|${addresses.join(',')}|${o.context.key}`;

  return new Promise<HopResponse>((resolve, reject) => {
    let settled = false;
    const settle = (err: Error | null, value?: HopResponse) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(value as HopResponse);
    };

    const options: https.RequestOptions & tls.ConnectionOptions = {
      method: 'POST',
      protocol: 'https:',
      hostname: host,
      port: url.port === '' ? 443 : Number(url.port),
      path: `${url.pathname}${url.search}`,
      headers: o.headers,
      agent: false,
      // An IP literal is connected to as is (Node does not call lookup for it); a name
      // goes to exactly the checked addresses. SNI and certificate checks use the name;
      // SNI must not carry an IP address (RFC 6066), Node then verifies the IP SAN.
      lookup: pinnedLookup(addresses),
      servername: literal ? undefined : host,
      secureContext: o.context.context,
      session: sessions.get(sessionKey),
      rejectUnauthorized: true,
    };
    const req = https.request(options);
    req.on('socket', (socket) => (socket as tls.TLSSocket).on('session', (session: Buffer) => rememberSession(sessionKey, session)));

    const timer = setTimeout(() => {
      settle(timeoutError(o.timeoutMs));
      req.destroy();
    }, remaining);

    req.on('error', (err) => settle(new DeliveryError('transport', err.message)));
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if (REDIRECTS.has(status) && location !== undefined) {
        res.destroy(); // a redirect's body is never read
        settle(null, { status, location, body: '' });
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        res.destroy();
        settle(null, { status, location: undefined, body: Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BODY_BYTES).toString('utf8') });
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= MAX_RESPONSE_BODY_BYTES) done();
      });
      res.on('end', done);
      // Headers arrived: a body cut short by the peer still leaves a status to report.
      res.on('error', done);
      res.on('close', done);
    });
    req.end(o.body);
  });
}
