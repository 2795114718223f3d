import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { API_KEY_PATTERN } from '../../domain/keys/api-keys';
import type { ApiKeyService } from '../../domain/keys/api-keys';
import type { RequestLimits, RateDecision } from '../../lib/ratelimit';
import { ApiError } from '../http-errors';

export interface RegisteredRoute {
  method: string;
  url: string;
  scope: string | null;
  public: boolean;
  /** Widget routes: authenticated by site id + Origin. */
  site: boolean;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route as registered, with the scope it demands: what the deny-by-default scan walks. */
    routeTable: RegisteredRoute[];
  }
}

const BEARER = /^Bearer +(\S+) *$/i;

const invalidKey = (message: string) => new ApiError(401, 'invalid_api_key', message, {}, { 'WWW-Authenticate': 'Bearer' });

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
 */
export const authPlugin = fp(async (app: FastifyInstance, opts: { apiKeys: ApiKeyService; limits: RequestLimits }) => {
  app.decorate('routeTable', [] as RegisteredRoute[]);
  app.decorateRequest('auth', null);

  app.addHook('onRoute', (route: RouteOptions) => {
    const config = (route.config ?? {}) as { scope?: string; public?: boolean; site?: boolean; methodNotAllowed?: boolean };
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    // The 405 answers of known paths serve nothing: not routes of the API.
    if (config.methodNotAllowed) return;
    // CORS preflights carry no credentials and return no data.
    if (methods.every((m) => m === 'OPTIONS')) return;
    if (!config.scope && !config.public && !config.site) {
      throw new Error(`Route ${methods.join(',')} ${route.url} declares no scope: every route must name one (or be explicitly public)`);
    }
    if (config.scope && config.public) throw new Error(`Route ${route.url} cannot be both public and scoped`);
    for (const method of methods) {
      app.routeTable.push({ method, url: route.url, scope: config.scope ?? null, public: Boolean(config.public || config.site), site: Boolean(config.site) });
    }
  });

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return;
    const config = request.routeOptions.config;
    if (config.public || config.site || config.methodNotAllowed || request.method === 'OPTIONS') return;
    const scope = config.scope;
    // Unreachable while onRoute enforces a declaration; kept so a gap fails closed.
    if (!scope) throw new ApiError(403, 'insufficient_scope', 'This route requires a scope no key holds');

    const header = request.headers.authorization;
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

    const perKey = await opts.limits.perKey.consume(found.key.id);
    const decisive = perKey.allowed ? await opts.limits.perWorkspace.consume(found.key.workspaceId) : perKey;
    if (!decisive.allowed) {
      const which = decisive === perKey ? 'this API key' : 'this workspace';
      const retryAfter = Math.max(1, Math.ceil(decisive.resetMs / 1000));
      throw new ApiError(429, 'rate_limited', `Rate limit of ${decisive.limit} requests a minute for ${which} exceeded; retry in ${retryAfter} s`, {}, {
        'Retry-After': String(retryAfter),
        ...rateHeaders(decisive),
      });
    }
    // Report the tighter of the two remaining budgets.
    const shown = decisive.remaining < perKey.remaining ? decisive : perKey;
    for (const [name, value] of Object.entries(rateHeaders(shown))) reply.header(name, value);
    request.auth = found.key;
  });
});
