import http from 'node:http';
import net from 'node:net';
import { DeliveryError, safePost, type SafePostOptions } from '../../lib/net/safe-http';
import { policyFromCidrs, type Resolver } from '../../lib/net/ssrf';
import { createTestPki, startHttpsReceiver, type HttpsReceiver, type ReceiverHandler } from '../../dev/fakes/tls';

const pki = createTestPki();
const allow127 = policyFromCidrs('127.0.0.1/32');
const BODY = JSON.stringify({ event: 'message.created', text: 'héllo ✓' });
const HEADERS = { 'Content-Type': 'application/json', 'X-Concierge-Signature': 't=1700000000,v1=abc123', 'X-Concierge-Event-Id': 'evt_1' };

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

async function receiver(handler: ReceiverHandler, opts: { host?: string; port?: number } = {}): Promise<HttpsReceiver> {
  const r = await startHttpsReceiver({ ...opts, handler });
  opened.push(r);
  return r;
}

/** Two receivers on one port, 127.0.0.1 and 127.0.0.2, so one URL `https://receiver.test:PORT` can reach either. */
async function receiverPair(onA: ReceiverHandler, onB: ReceiverHandler): Promise<{ a: HttpsReceiver; b: HttpsReceiver; port: number }> {
  const a = await receiver(onA, { host: '127.0.0.1' });
  const b = await receiver(onB, { host: '127.0.0.2', port: a.port });
  return { a, b, port: a.port };
}

const answer = (status: number, body = '', headers: Record<string, string> = {}): ReceiverHandler => (_req, res) => {
  res.writeHead(status, headers);
  res.end(body);
};
const redirect = (status: number, location: string) => answer(status, '', { Location: location });
const hang: ReceiverHandler = () => undefined;

const options = (o: Partial<SafePostOptions> = {}): SafePostOptions => ({
  headers: HEADERS,
  body: BODY,
  timeoutMs: 3000,
  policy: allow127,
  ca: pki.ca,
  ...o,
});

async function deliveryError(p: Promise<unknown>): Promise<DeliveryError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(DeliveryError);
    return err as DeliveryError;
  }
  throw new Error('expected the delivery to fail');
}

/** A resolver that answers from a script, one entry per call (the last one repeats), counting calls. */
function scriptedResolver(script: string[][]): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const fn = async (hostname: string) => {
    calls.push(hostname);
    return script[Math.min(calls.length - 1, script.length - 1)];
  };
  return Object.assign(fn, { calls });
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('safePost delivers', () => {
  it('the POST with the exact body and headers and returns status and body', async () => {
    const r = await receiver(answer(202, 'accepted'));
    const result = await safePost(`${r.url}/hooks/in?x=1`, options());

    expect(result).toMatchObject({ status: 202, body: 'accepted', url: `${r.url}/hooks/in?x=1` });
    expect(result.latencyMs).toBeGreaterThanOrEqual(0);
    expect(r.hits).toHaveLength(1);
    const hit = r.hits[0];
    expect(hit.method).toBe('POST');
    expect(hit.path).toBe('/hooks/in?x=1');
    expect(hit.rawBody.equals(Buffer.from(BODY, 'utf8'))).toBe(true);
    expect(hit.headers).toMatchObject({
      'content-type': 'application/json',
      'x-concierge-signature': 't=1700000000,v1=abc123',
      'x-concierge-event-id': 'evt_1',
      'content-length': String(Buffer.byteLength(BODY)),
      'user-agent': 'Concierge-Webhooks/1.0',
      host: `127.0.0.1:${r.port}`,
    });
    expect(hit.headers['transfer-encoding']).toBeUndefined();
  });

  it('a Buffer body with its own User-Agent; the caller cannot set Content-Length', async () => {
    const r = await receiver(answer(200));
    const body = Buffer.from([0, 1, 2, 0xff]);
    await safePost(r.url, options({ body, userAgent: 'Test/2', headers: { 'content-length': '999', 'X-A': 'b' } }));
    expect(r.hits[0].rawBody.equals(body)).toBe(true);
    expect(r.hits[0].headers).toMatchObject({ 'content-length': '4', 'user-agent': 'Test/2', 'x-a': 'b' });
  });

  it('only the first 1 KiB of a 10 KiB response', async () => {
    const r = await receiver(answer(200, 'x'.repeat(10 * 1024)));
    const result = await safePost(r.url, options());
    expect(result.body).toBe('x'.repeat(1024));
  });

  it('without waiting for a response body that never ends', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200);
      res.write('y'.repeat(4096)); // and never end()
    });
    const started = Date.now();
    const result = await safePost(r.url, options({ timeoutMs: 2000 }));
    expect(result).toMatchObject({ status: 200, body: 'y'.repeat(1024) });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('any non-redirect status as is, including a 3xx without Location', async () => {
    const r = await receiver((req, res) => {
      if (req.url === '/error') answer(500, 'boom')(req, res);
      else if (req.url === '/no-location') answer(302, 'where?')(req, res);
      else answer(304)(req, res);
    });
    await expect(safePost(`${r.url}/error`, options())).resolves.toMatchObject({ status: 500, body: 'boom' });
    await expect(safePost(`${r.url}/no-location`, options())).resolves.toMatchObject({ status: 302, body: 'where?' });
    await expect(safePost(`${r.url}/other`, options())).resolves.toMatchObject({ status: 304, body: '' });
  });
});

describe('safePost refuses unsafe addresses without connecting', () => {
  it('a 127.0.0.1 URL under an empty policy', async () => {
    const r = await receiver(answer(200));
    const err = await deliveryError(safePost(r.url, options({ policy: policyFromCidrs(undefined) })));
    expect(err.kind).toBe('unsafe_url');
    expect(err.message).toBe('host is a loopback address (127.0.0.1)');
    expect(r.hits).toHaveLength(0);
  });

  it('a name with one forbidden address among its answers', async () => {
    const r = await receiver(answer(200));
    const resolve = scriptedResolver([['127.0.0.1', '127.0.0.2']]);
    const err = await deliveryError(safePost(`https://receiver.test:${r.port}/`, options({ resolve })));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'host resolves to a loopback address (127.0.0.2)' });
    expect(r.hits).toHaveLength(0);
  });

  it('a name that does not resolve', async () => {
    const resolve: Resolver = () => Promise.reject(new Error('ENOTFOUND'));
    const err = await deliveryError(safePost('https://nowhere.test/', options({ resolve })));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'host does not resolve' });
  });
});

describe('safePost redirects', () => {
  it.each([302, 307])('%i to a receiver on 127.0.0.2 (not allowed) is refused before connecting', async (status) => {
    const b = await receiver(answer(200, 'stolen'), { host: '127.0.0.2' });
    const a = await receiver(redirect(status, `${b.url}/internal`));
    const err = await deliveryError(safePost(a.url, options()));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'redirect refused: host is a loopback address (127.0.0.2)' });
    expect(a.hits).toHaveLength(1);
    expect(b.hits).toHaveLength(0);
  });

  it('to cloud metadata is refused', async () => {
    const a = await receiver(redirect(302, 'https://169.254.169.254/latest/meta-data/'));
    const err = await deliveryError(safePost(a.url, options()));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'redirect refused: host is a link-local address (169.254.169.254)' });
  });

  it('to http:// is refused, even to an allowed address', async () => {
    let plainHits = 0;
    const plain = http.createServer((_req, res) => {
      plainHits++;
      res.end();
    });
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    opened.push({ close: () => new Promise<void>((resolve) => plain.close(() => resolve())) });
    const plainPort = (plain.address() as net.AddressInfo).port;

    const a = await receiver(redirect(301, `http://127.0.0.1:${plainPort}/hook`));
    const err = await deliveryError(safePost(a.url, options()));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'redirect refused: scheme must be https' });
    expect(plainHits).toBe(0);
  });

  it('with a Location that does not parse is refused', async () => {
    const a = await receiver(redirect(302, 'https://[::1'));
    const err = await deliveryError(safePost(a.url, options()));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'redirect refused: Location does not parse as a URL' });
  });

  it.each([301, 302, 303, 307, 308])('%i within the policy is followed with the same POST', async (status) => {
    const r = await receiver((req, res) => (req.url === '/a' ? redirect(status, '/b?n=2')(req, res) : answer(201, 'done')(req, res)));
    const result = await safePost(`${r.url}/a`, options());
    expect(result).toMatchObject({ status: 201, body: 'done', url: `${r.url}/b?n=2` });
    expect(r.hits.map((h) => h.path)).toEqual(['/a', '/b?n=2']);
    const second = r.hits[1];
    expect(second.method).toBe('POST');
    expect(second.rawBody.toString('utf8')).toBe(BODY);
    expect(second.headers['x-concierge-signature']).toBe(HEADERS['X-Concierge-Signature']);
  });

  it('exactly 5 are followed', async () => {
    const r = await receiver((req, res) => {
      const n = Number(req.url?.slice(1) || 0);
      if (n < 5) redirect(302, `/${n + 1}`)(req, res);
      else answer(200, 'end')(req, res);
    });
    const result = await safePost(`${r.url}/0`, options());
    expect(result).toMatchObject({ status: 200, url: `${r.url}/5` });
    expect(r.hits).toHaveLength(6);
  });

  it('more than maxRedirects fail with too_many_redirects', async () => {
    const r = await receiver((req, res) => redirect(307, `/${Number(req.url?.slice(1) || 0) + 1}`)(req, res));
    const err = await deliveryError(safePost(`${r.url}/0`, options()));
    expect(err.kind).toBe('too_many_redirects');
    expect(r.hits).toHaveLength(6); // the first request and 5 redirects followed

    const limited = await deliveryError(safePost(`${r.url}/0`, options({ maxRedirects: 1 })));
    expect(limited.kind).toBe('too_many_redirects');
    expect(r.hits).toHaveLength(6 + 2);
  });
});

describe('safePost connects only to checked addresses (DNS rebinding)', () => {
  // `receiver.test` exists only in these fake resolvers: if the client asked DNS again at
  // connect time it could not connect at all.
  it('a second delivery whose name now resolves to a forbidden address never connects', async () => {
    const { a, b, port } = await receiverPair(answer(200, 'A'), answer(200, 'B'));
    const resolve = scriptedResolver([['127.0.0.1'], ['127.0.0.2']]);

    const first = await safePost(`https://receiver.test:${port}/first`, options({ resolve }));
    expect(first).toMatchObject({ status: 200, body: 'A' });
    expect(resolve.calls).toEqual(['receiver.test']); // resolved once, connected to what was checked

    const err = await deliveryError(safePost(`https://receiver.test:${port}/second`, options({ resolve })));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'host resolves to a loopback address (127.0.0.2)' });
    expect(a.hits.map((h) => h.path)).toEqual(['/first']);
    expect(b.hits).toHaveLength(0);
  });

  it('a redirect to the same name that now resolves to a forbidden address never connects', async () => {
    let port = 0;
    const { a, b, port: p } = await receiverPair(
      (req, res) => redirect(307, `https://receiver.test:${port}/again`)(req, res),
      answer(200, 'B'),
    );
    port = p;
    const resolve = scriptedResolver([['127.0.0.1'], ['127.0.0.2']]);
    const err = await deliveryError(safePost(`https://receiver.test:${port}/first`, options({ resolve })));
    expect(err).toMatchObject({ kind: 'unsafe_url', message: 'redirect refused: host resolves to a loopback address (127.0.0.2)' });
    expect(resolve.calls).toHaveLength(2);
    expect(a.hits.map((h) => h.path)).toEqual(['/first']);
    expect(b.hits).toHaveLength(0);
  });

  it('each hop connects to exactly the address its own check approved', async () => {
    let port = 0;
    const { a, b, port: p } = await receiverPair(
      answer(200, 'A'),
      (req, res) => redirect(302, `https://receiver.test:${port}/hop2`)(req, res),
    );
    port = p;
    const resolve = scriptedResolver([['127.0.0.2'], ['127.0.0.1']]);
    const result = await safePost(
      `https://receiver.test:${port}/hop1`,
      options({ resolve, policy: policyFromCidrs('127.0.0.1/32,127.0.0.2/32') }),
    );
    expect(result).toMatchObject({ status: 200, body: 'A', url: `https://receiver.test:${port}/hop2` });
    expect(b.hits.map((h) => h.path)).toEqual(['/hop1']);
    expect(a.hits.map((h) => h.path)).toEqual(['/hop2']);
  });
});

describe('safePost TLS', () => {
  it('verifies a hostname against the certificate, with SNI, not the IP', async () => {
    const r = await receiver(answer(200, 'ok'));
    const resolve = scriptedResolver([['127.0.0.1']]);
    const result = await safePost(`https://receiver.test:${r.port}/`, options({ resolve }));
    expect(result.status).toBe(200);
    expect(r.hits[0].servername).toBe('receiver.test');
    expect(r.hits[0].headers.host).toBe(`receiver.test:${r.port}`);
  });

  it('refuses a name the certificate does not cover, even at an address it does cover', async () => {
    const r = await receiver(answer(200));
    const resolve = scriptedResolver([['127.0.0.1']]);
    const err = await deliveryError(safePost(`https://wrong.test:${r.port}/`, options({ resolve })));
    expect(err.kind).toBe('transport');
    expect(err.message).toMatch(/Hostname\/IP does not match certificate's altnames/);
    expect(r.hits).toHaveLength(0);
  });

  it('verifies an IP literal against the IP SAN and sends no SNI', async () => {
    const r = await receiver(answer(200));
    await safePost(r.url, options());
    expect(r.hits[0].servername).toBeNull();
  });

  it('resolves with the system resolver by default (localhost, trailing dot)', async () => {
    const r = await receiver(answer(200));
    await expect(safePost(`https://localhost.:${r.port}/`, options())).resolves.toMatchObject({ status: 200 });
    expect(r.hits[0].servername).toBe('localhost');
  });

  it('does not trust the test CA unless told to', async () => {
    const r = await receiver(answer(200));
    const err = await deliveryError(safePost(r.url, options({ ca: undefined })));
    expect(err.kind).toBe('transport');
    expect(err.message).toMatch(/certificate/);
    expect(r.hits).toHaveLength(0);
  });
});

describe('safePost failures', () => {
  it('times out within about timeoutMs when the receiver never answers', async () => {
    const r = await receiver(hang);
    const started = Date.now();
    const err = await deliveryError(safePost(r.url, options({ timeoutMs: 300 })));
    const elapsed = Date.now() - started;
    expect(err).toMatchObject({ kind: 'timeout', message: 'no response within 300 ms' });
    expect(elapsed).toBeGreaterThanOrEqual(250);
    expect(elapsed).toBeLessThan(1000);
  });

  it('has one deadline for the whole call, redirects included', async () => {
    const r = await receiver((req, res) => {
      setTimeout(() => redirect(302, `/${Number(req.url?.slice(1) || 0) + 1}`)(req, res), 150);
    });
    const started = Date.now();
    const err = await deliveryError(safePost(`${r.url}/0`, options({ timeoutMs: 400 })));
    expect(err.kind).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(800);
    expect(r.hits.length).toBeGreaterThanOrEqual(2);
  });

  it('times out when the resolver hangs', async () => {
    const resolve: Resolver = () => new Promise<string[]>(() => undefined);
    const err = await deliveryError(safePost('https://slow.test/', options({ resolve, timeoutMs: 200 })));
    expect(err.kind).toBe('timeout');
  });

  it('times out when the headers arrive but the body stalls below 1 KiB', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200);
      res.write('partial');
    });
    const err = await deliveryError(safePost(r.url, options({ timeoutMs: 300 })));
    expect(err.kind).toBe('timeout');
  });

  it('reports a closed port as a transport error', async () => {
    const port = await closedPort();
    const err = await deliveryError(safePost(`https://127.0.0.1:${port}/`, options()));
    expect(err).toMatchObject({ kind: 'transport', message: `connect ECONNREFUSED 127.0.0.1:${port}` });
  });
});

describe('proxy environment variables', () => {
  const names = ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy', 'NO_PROXY', 'no_proxy'];
  let saved: Record<string, string | undefined>;
  beforeEach(() => {
    saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  });
  afterEach(() => {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  });

  it('are ignored: delivery goes direct', async () => {
    let proxyConnections = 0;
    const proxy = net.createServer((socket) => {
      proxyConnections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    opened.push({ close: () => new Promise<void>((resolve) => proxy.close(() => resolve())) });
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;

    process.env.HTTPS_PROXY = 'http://127.0.0.1:9';
    for (const n of ['https_proxy', 'HTTP_PROXY', 'http_proxy', 'ALL_PROXY', 'all_proxy']) process.env[n] = proxyUrl;
    delete process.env.NO_PROXY;
    delete process.env.no_proxy;

    const r = await receiver(answer(200, 'direct'));
    await expect(safePost(r.url, options())).resolves.toMatchObject({ status: 200, body: 'direct' });
    expect(r.hits).toHaveLength(1);
    expect(proxyConnections).toBe(0);
  });
});
