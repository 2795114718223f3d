import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';

export interface TestPki {
  /** PEM of the test CA; pass it as `ca` to trust the server certificate. */
  ca: string;
  /** PEM of the server certificate, SAN DNS:localhost, DNS:receiver.test, IP:127.0.0.1, IP:127.0.0.2. */
  cert: string;
  key: string;
}

let cached: TestPki | null = null;

/** A throw-away CA and a server certificate signed by it (EC P-256), made once per process. */
export function createTestPki(): TestPki {
  if (cached) return cached;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'concierge-pki-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file('ca.key'));
    openssl(
      'req', '-x509', '-new', '-key', file('ca.key'), '-sha256', '-days', '7',
      '-subj', '/CN=Concierge Test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE',
      '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
      '-out', file('ca.pem'),
    );
    openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file('server.key'));
    openssl('req', '-new', '-key', file('server.key'), '-subj', '/CN=receiver.test', '-out', file('server.csr'));
    fs.writeFileSync(
      file('server.ext'),
      [
        'basicConstraints=critical,CA:FALSE',
        'keyUsage=critical,digitalSignature',
        'extendedKeyUsage=serverAuth',
        'subjectAltName=DNS:localhost,DNS:receiver.test,IP:127.0.0.1,IP:127.0.0.2',
        'subjectKeyIdentifier=hash',
        'authorityKeyIdentifier=keyid,issuer',
        '',
      ].join('\n'),
    );
    openssl(
      'x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca.key'),
      '-set_serial', `0x${Date.now().toString(16)}`, '-days', '7', '-sha256',
      '-extfile', file('server.ext'), '-out', file('server.pem'),
    );
    cached = {
      ca: fs.readFileSync(file('ca.pem'), 'utf8'),
      cert: fs.readFileSync(file('server.pem'), 'utf8'),
      key: fs.readFileSync(file('server.key'), 'utf8'),
    };
    return cached;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface ReceiverHit {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  rawBody: Buffer;
  /** The SNI name the client sent, or null. */
  servername: string | null;
  at: number;
}

export interface HttpsReceiver {
  url: string;
  port: number;
  hits: ReceiverHit[];
  close(): Promise<void>;
}

export type ReceiverHandler = (req: IncomingMessage & { rawBody: Buffer }, res: ServerResponse) => void;

/**
 * An HTTPS server with the test certificate that records every request (headers and raw
 * body) before handing it to `handler`. `port` 0 (default) picks a free port; a fixed port
 * lets two receivers share one port on different loopback addresses. `pki`: another process's
 * (default: this process's test PKI).
 */
export async function startHttpsReceiver(opts: { host?: string; port?: number; handler: ReceiverHandler; pki?: TestPki }): Promise<HttpsReceiver> {
  const host = opts.host ?? '127.0.0.1';
  const pki = opts.pki ?? createTestPki();
  const hits: ReceiverHit[] = [];
  const server = https.createServer({ cert: pki.cert, key: pki.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks);
      const servername = (req.socket as { servername?: string | false }).servername;
      hits.push({
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        rawBody,
        servername: typeof servername === 'string' ? servername : null,
        at: Date.now(),
      });
      opts.handler(Object.assign(req, { rawBody }), res);
    });
  });
  // Clients that go away mid-handshake (refused certificates) are not test failures.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  const urlHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `https://${urlHost}:${port}`,
    port,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
