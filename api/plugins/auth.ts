import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { API_KEY_PATTERN } from '../../domain/keys/api-keys';
import type { ApiKeyService } from '../../domain/keys/api-keys';
import type { SessionPrincipal, SessionService } from '../../domain/people/sessions';
import { may } from '../../domain/people/roles';
import { sameToken } from '../../domain/people/tokens';
import type { RequestLimits, RateDecision } from '../../lib/ratelimit';
import { ApiError } from '../http-errors';
import type { Principal } from '../types';

/** The console's session cookie: HttpOnly, SameSite=Lax, Path=/, Secure behind https (api/routes/console/cookie.ts sets it). */
export const SESSION_COOKIE = 'concierge_session';
/** The header an unsafe request made with a session must carry: the session's CSRF token (GET /api/console/session). */
export const CSRF_HEADER = 'x-csrf-token';

export interface RegisteredRoute {
  method: string;
  url: string;
  scope: string | null;
  public: boolean;
  /** Widget routes: authenticated by site id + Origin. */
  site: boolean;
  /** The console's own operations: `session` (a signed-in user) or `public` (before a session); null elsewhere. */
  console: 'public' | 'session' | null;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route as registered, with the scope it demands: what the deny-by-default scan walks. */
    routeTable: RegisteredRoute[];
  }
}

const BEARER = /^Bearer +(\S+) *$/i;

const invalidKey = (message: string) => new ApiError(401, 'invalid_api_key', message, {}, { 'WWW-Authenticate': 'Bearer' });
const notSignedIn = (message: string) => new ApiError(401, 'not_signed_in', message);
const csrfFailed = (message: string) => new ApiError(403, 'csrf_failed', message);

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The origins a console page may send unsafe requests from: PUBLIC_BASE_URL's, and the one the request was addressed to. */
function ownOrigins(request: FastifyRequest, publicBaseUrl: string): Set<string> {
  const origins = new Set<string>([new URL(publicBaseUrl).origin]);
  const host = request.headers.host;
  if (host) {
    try {
      origins.add(new URL(`${request.protocol}://${host}`).origin);
    } catch {
      // A Host header that is no host: only PUBLIC_BASE_URL's origin is ours.
    }
  }
  return origins;
}

/**
 * Same-origin only (docs/console.md): an unsafe request's Origin must be the service's own; without Origin,
 * Sec-Fetch-Site must say `same-origin`. Browsers send Origin on every POST, PUT, PATCH and DELETE, so the console's
 * own requests always pass. `strict: false` (before a session: sign-in, links) refuses only what says another site
 * sent it, so a client that is no browser may still sign in.
 */
function assertSameOrigin(request: FastifyRequest, publicBaseUrl: string, strict: boolean): void {
  const origin = request.headers.origin;
  if (typeof origin === 'string') {
    if (!ownOrigins(request, publicBaseUrl).has(origin)) throw csrfFailed(`Origin: '${origin.slice(0, 200)}' is not this console's origin; the console's requests are same-origin only`);
    return;
  }
  const site = request.headers['sec-fetch-site'];
  if (site === 'same-origin') return;
  if (strict || site === 'cross-site' || site === 'same-site') throw csrfFailed("Origin: missing, and Sec-Fetch-Site is not same-origin; the console's requests are same-origin only");
}

/** An unsafe method with a session: same origin, and the session's synchronizer token in X-CSRF-Token. */
function assertCsrf(request: FastifyRequest, principal: SessionPrincipal, publicBaseUrl: string): void {
  if (SAFE_METHODS.has(request.method)) return;
  assertSameOrigin(request, publicBaseUrl, true);
  const token = request.headers[CSRF_HEADER];
  if (typeof token !== 'string' || !sameToken(token, principal.csrfToken)) {
    throw csrfFailed('X-CSRF-Token: missing or not this session\'s; send the csrf_token of GET /api/console/session');
  }
}

function rateHeaders(d: RateDecision): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(d.limit),
    'X-RateLimit-Remaining': String(Math.max(0, d.remaining)),
    // Unix time (seconds) at which the current window ends.
    'X-RateLimit-Reset': String(Math.ceil((Date.now() + d.resetMs) / 1000)),
  };
}

/**
 * Deny by default. Registering a route that declares neither a scope nor `public`
 * throws, so the app cannot boot with an unguarded route. Each guarded request then
 * runs the contract's four checks in order (docs/contract.md): key format/known (401 invalid_api_key), key
 * active (401 revoked_api_key), scope (403 insufficient_scope), rate limits per key and
 * per workspace (429 rate_limited). It runs in onRequest, before the body is read.
 *
 * Without an Authorization header, a console session cookie authenticates an /api/v1 operation instead: the
 * session must be live (401 not_signed_in), an unsafe method must be same-origin and carry the session's CSRF
 * token (403 csrf_failed), the route's scope must be one of the role's (403 insufficient_scope), and the same
 * limits count per user. With the header, a request is a key's exactly as before, whatever cookie it carries.
 * The console's own routes (/api/console/, `config.console`) take a session only: an API key gets 401 there.
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { apiKeys: ApiKeyService; limits: RequestLimits; sessions?: SessionService | null; publicBaseUrl?: string }) => {
  const publicBaseUrl = opts.publicBaseUrl ?? 'http://127.0.0.1:3000';
  app.decorate('routeTable', [] as RegisteredRoute[]);
  app.decorateRequest('auth', null);

  app.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config ?? {}) as { scope?: string; public?: boolean; site?: boolean; methodNotAllowed?: boolean; console?: 'public' | 'session' };
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // The 405 answers of known paths serve nothing: not routes of the API.
    if (config.methodNotAllowed) return;
    // CORS preflights carry no credentials and return no data.
    if (methods.every((m) => m === 'OPTIONS')) return;
    if (config.console) {
      if (config.scope || config.public || config.site) throw new Error(`Route ${route.url}: a console route takes neither a scope nor public/site`);
      if (!route.url.startsWith('/api/console/')) throw new Error(`Route ${route.url}: console routes live under /api/console/`);
      for (const method of methods) app.routeTable.push({ method, url: route.url, scope: null, public: false, site: false, console: config.console });
      return;
    }
    if (!config.scope && !config.public && !config.site) {
      throw new Error(`Route ${methods.join(',')} ${route.url} declares no scope: every route must name one (or be explicitly public)`);
    }
    if (config.scope && config.public) throw new Error(`Route ${route.url} cannot be both public and scoped`);
    for (const method of methods) {
      app.routeTable.push({ method, url: route.url, scope: config.scope ?? null, public: Boolean(config.public || config.site), site: Boolean(config.site), console: null });
    }
  });

  /** Counts a request against the principal's limit (per key, or per user as per key) and its workspace's. */
  async function limit(principal: Principal, reply: FastifyReply): Promise<void> {
    const perKey = await opts.limits.perKey.consume(principal.kind === 'key' ? principal.id : `user:${principal.id}`);
    const decisive = perKey.allowed ? await opts.limits.perWorkspace.consume(principal.workspaceId) : perKey;
    if (!decisive.allowed) {
      const which = decisive === perKey ? (principal.kind === 'key' ? 'this API key' : 'this user') : 'this workspace';
      const retryAfter = Math.max(1, Math.ceil(decisive.resetMs / 1000));
      throw new ApiError(429, 'rate_limited', `Rate limit of ${decisive.limit} requests a minute for ${which} exceeded; retry in ${retryAfter} s`, {}, {
        'Retry-After': String(retryAfter),
        ...rateHeaders(decisive),
      });
    }
    // Report the tighter of the two remaining budgets.
    const shown = decisive.remaining < perKey.remaining ? decisive : perKey;
    for (const [name, value] of Object.entries(rateHeaders(shown))) reply.header(name, value);
  }

  /** The session the request's cookie names, or 401 not_signed_in. */
  async function session(request: FastifyRequest): Promise<SessionPrincipal> {
    const token = request.cookies?.[SESSION_COOKIE];
    if (!token) throw notSignedIn('No session: sign in at POST /api/console/sign-in');
    const principal = opts.sessions ? await opts.sessions.authenticate(token) : null;
    if (!principal) throw notSignedIn('The session has expired or was signed out; sign in again');
    return principal;
  }

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return;
    const config = request.routeOptions.config;
    if (config.console === 'public') {
      // Before a session there is no token to check; a sign-in from another site (login CSRF) is refused by origin.
      if (!SAFE_METHODS.has(request.method)) assertSameOrigin(request, publicBaseUrl, false);
      return;
    }
    if (config.console === 'session') {
      // The console's own operations are a signed-in person's only: an API key never reaches them.
      if (request.headers.authorization) throw notSignedIn("The console's operations take a session cookie, not an API key");
      const principal = await session(request);
      assertCsrf(request, principal, publicBaseUrl);
      if (config.permission && !may(principal.role, config.permission)) throw new ApiError(403, 'forbidden', `Your role (${principal.role}) may not do this`);
      await limit(principal, reply);
      request.auth = principal;
      return;
    }
    if (config.public || config.site || config.methodNotAllowed || request.method === 'OPTIONS') return;
    const scope = config.scope;
    // Unreachable while onRoute enforces a declaration; kept so a gap fails closed.
    if (!scope) throw new ApiError(403, 'insufficient_scope', 'This route requires a scope no key holds');

    const header = request.headers.authorization;
    if (!header && request.cookies?.[SESSION_COOKIE]) {
      // A console user calling the API with the session: the role's scopes, the same deny by default as a key.
      const principal = await session(request);
      assertCsrf(request, principal, publicBaseUrl);
      if (!principal.scopes.has(scope)) {
        throw new ApiError(403, 'insufficient_scope', `Your role (${principal.role}) lacks the '${scope}' scope this endpoint requires`, { required_scope: scope });
      }
      await limit(principal, reply);
      request.auth = principal;
      return;
    }
    if (!header) throw invalidKey("Authorization: missing; send 'Authorization: Bearer sk_...'");
    const match = BEARER.exec(header);
    if (!match) throw invalidKey("Authorization: malformed; expected 'Bearer sk_' followed by 64 hexadecimal characters");
    const presented = match[1];
    if (!API_KEY_PATTERN.test(presented)) throw invalidKey("Authorization: malformed key; expected 'sk_' followed by 64 hexadecimal characters");

    const found = await opts.apiKeys.lookup(presented);
    if (found.kind === 'unknown') throw invalidKey('API key not recognised');
    if (found.kind === 'revoked') throw new ApiError(401, 'revoked_api_key', 'API key is no longer active (deleted or rotated)');
    if (!found.key.scopes.has(scope)) {
      throw new ApiError(403, 'insufficient_scope', `API key lacks the '${scope}' scope this endpoint requires`, { required_scope: scope });
    }

    await limit(found.key, reply);
    request.auth = found.key;
  });
});
