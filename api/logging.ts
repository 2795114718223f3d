import type { FastifyRequest } from 'fastify';

/**
 * Query parameters whose value works as a credential, compared case-insensitively:
 * a widget conversation id (with the public site id it reads and writes the
 * conversation), a visitor's `user_hash` and the `external_id` it vouches for, the
 * provider's verification token, an OpenID Connect authorization code (the console's SSO callback), and the usual
 * names a client might put a key under.
 */
const SECRET_QUERY_PARAMS = new Set(['conversation_id', 'user_hash', 'external_id', 'hub.verify_token', 'token', 'access_token', 'api_key', 'key', 'secret', 'code']);

/** Signed media links carry their whole claim (and its MAC) in the path: anyone holding one can fetch. */
const MEDIA_PATH = /(\/api\/media\/)[^?#]*/i;
/** The codec endpoint takes its token as a path segment from browser UIs that cannot send a header. */
const CODEC_TOKEN_PATH = /(\/api\/temporal-codec\/)[^/?#]+(?=\/[^/?#]+\/?(?:[?#]|$))/i;

export const REDACTED = '[redacted]';

function decodeName(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' ')).toLowerCase();
  } catch {
    // Malformed escapes: compare the raw spelling (the router will refuse it anyway).
    return raw.toLowerCase();
  }
}

/**
 * A request URL fit for a log: the media token and the values of credential-like query
 * parameters replaced by `[redacted]`, everything else kept as sent (names, order,
 * encoding), so a log line still says what was asked for.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  const path = (q === -1 ? url : url.slice(0, q)).replace(MEDIA_PATH, `$1${REDACTED}`).replace(CODEC_TOKEN_PATH, `$1${REDACTED}`);
  if (q === -1) return path;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq === -1 ? pair : pair.slice(0, eq);
      return SECRET_QUERY_PARAMS.has(decodeName(name)) ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
  return `${path}?${query}`;
}

/**
 * Fastify's request serializer with the URL redacted. Fastify (through pino) logs
 * `req.url` on every request by default; headers are never serialized here, so
 * `Authorization`, `X-Hub-Signature-256` and cookies cannot reach the log this way.
 */
export function serializeRequest(req: FastifyRequest): Record<string, unknown> {
  return {
    method: req.method,
    url: redactUrl(req.url),
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket ? req.socket.remotePort : undefined,
  };
}

/** Headers that carry a credential, wherever a log call puts a headers object. */
const SECRET_HEADERS = ['authorization', 'cookie', 'set-cookie', 'x-hub-signature-256', 'x-concierge-signature', 'proxy-authorization'];

export const REDACT_PATHS = [
  ...SECRET_HEADERS.flatMap((h) => [`req.headers["${h}"]`, `headers["${h}"]`, `res.headers["${h}"]`]),
  '*.key',
  '*.secret',
];
