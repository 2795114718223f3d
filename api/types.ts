import type { AuthenticatedKey } from '../domain/keys/api-keys';
import type { Scope } from '../domain/keys/scopes';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a key needs to call the route. Every route declares a scope or `public`. */
    scope?: Scope;
    /** Reachable without an API key (the OpenAPI document, health checks). */
    public?: boolean;
    /** Widget routes: authenticated by site id + Origin instead of an API key. */
    site?: boolean;
    /** The 405 answer of a known path for the methods it does not serve (no data, so no credentials). */
    methodNotAllowed?: boolean;
  }
  interface FastifyInstance {
    /** Requests received and not yet answered (what a slow shutdown waits for). */
    inFlightRequests(): Array<{ method: string; url: string; seconds: number }>;
  }
  interface FastifyRequest {
    auth: AuthenticatedKey | null;
    idempotency: { workspaceId: string; key: string; fingerprint?: string; claimed: boolean } | null;
  }
}

/** The authenticated key of a request that passed the auth hook. */
export function authOf(request: { auth: AuthenticatedKey | null }): AuthenticatedKey {
  if (!request.auth) throw new Error('route reached without authentication');
  return request.auth;
}
