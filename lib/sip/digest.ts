import { createHash, randomBytes } from 'node:crypto';

/**
 * HTTP Digest for SIP (RFC 3261 §22.4 with RFC 2617 / RFC 8760): the answer to a 401
 * WWW-Authenticate or 407 Proxy-Authenticate challenge. MD5 and SHA-256 (and their
 * -sess forms), qop `auth` or none (auth-int is not offered by trunks in practice). The
 * password only enters the hash, never the header.
 */
export interface DigestChallenge {
  realm: string;
  nonce: string;
  opaque?: string;
  algorithm: string;
  qop?: string;
  stale: boolean;
}

/** Parses `Digest realm="…", nonce="…", …`; null for another scheme or a malformed one. */
export function parseChallenge(value: string): DigestChallenge | null {
  const m = /^\s*Digest\s+(.*)$/i.exec(value);
  if (!m) return null;
  const params: Record<string, string> = {};
  const re = /([a-zA-Z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))/g;
  for (let p = re.exec(m[1]); p; p = re.exec(m[1])) params[p[1].toLowerCase()] = p[2] ?? p[3] ?? '';
  if (params.realm === undefined || !params.nonce) return null;
  const qops = params.qop?.split(',').map((q) => q.trim().toLowerCase());
  return {
    realm: params.realm,
    nonce: params.nonce,
    opaque: params.opaque,
    algorithm: params.algorithm ?? 'MD5',
    qop: qops ? (qops.includes('auth') ? 'auth' : qops[0]) : undefined,
    stale: params.stale?.toLowerCase() === 'true',
  };
}

const HASHES: Record<string, string> = { md5: 'md5', 'sha-256': 'sha256' };

/** Whether we can answer this challenge (its algorithm and qop). */
export function supported(c: DigestChallenge): boolean {
  const alg = c.algorithm.toLowerCase().replace(/-sess$/, '');
  return alg in HASHES && (c.qop === undefined || c.qop === 'auth');
}

/** The Authorization / Proxy-Authorization value for one request. */
export function authorization(
  c: DigestChallenge,
  req: { method: string; uri: string; username: string; password: string; nc?: number; cnonce?: string },
): string {
  const alg = c.algorithm.toLowerCase();
  const h = (s: string) => createHash(HASHES[alg.replace(/-sess$/, '')]).update(s).digest('hex');
  const cnonce = req.cnonce ?? randomBytes(8).toString('hex');
  const nc = (req.nc ?? 1).toString(16).padStart(8, '0');
  let ha1 = h(`${req.username}:${c.realm}:${req.password}`);
  if (alg.endsWith('-sess')) ha1 = h(`${ha1}:${c.nonce}:${cnonce}`);
  const ha2 = h(`${req.method}:${req.uri}`);
  const response = c.qop ? h(`${ha1}:${c.nonce}:${nc}:${cnonce}:${c.qop}:${ha2}`) : h(`${ha1}:${c.nonce}:${ha2}`);
  const q = (s: string) => `"${s.replace(/(["\\])/g, '\\$1')}"`;
  const parts = [`username=${q(req.username)}`, `realm=${q(c.realm)}`, `nonce=${q(c.nonce)}`, `uri=${q(req.uri)}`, `response=${q(response)}`, `algorithm=${c.algorithm}`];
  if (c.opaque !== undefined) parts.push(`opaque=${q(c.opaque)}`);
  if (c.qop) parts.push(`qop=${c.qop}`, `nc=${nc}`, `cnonce=${q(cnonce)}`);
  return `Digest ${parts.join(', ')}`;
}
