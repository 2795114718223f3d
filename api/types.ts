import type { AuthenticatedKey } from '../domain/keys/api-keys';
import type { Scope } from '../domain/keys/scopes';
import type { SessionPrincipal } from '../domain/people/sessions';
import type { ConsolePermission } from '../domain/people/roles';
import type { AuditContext } from '../domain/audit/audit-log';

/**
 * Who a request acts for: an API key (`kind: 'key'`, Authorization: Bearer) or a console user signed in with a
 * session cookie (`kind: 'user'`). Both carry `id` (what rate limits count per), `workspaceId` and `scopes` (the
 * key's, or the role's): routes read only those, so an /api/v1 operation answers a session as it answers a key.
 */
export type Principal = AuthenticatedKey | SessionPrincipal;

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
    /**
     * The console's own operations (/api/console/): `session` needs a signed-in user (never an API key), with the
     * CSRF token on unsafe methods; `public` is what comes before a session (sign-in, links, password reset).
     */
    console?: 'public' | 'session';
    /** A console operation's permission beyond a session (domain/people/roles.ts): 403 forbidden for other roles. */
    permission?: ConsolePermission;
  }
  interface FastifyInstance {
    /** Requests received and not yet answered (what a slow shutdown waits for). */
    inFlightRequests(): Array<{ method: string; url: string; seconds: number }>;
  }
  interface FastifyRequest {
    auth: Principal | null;
    idempotency: { workspaceId: string; key: string; fingerprint?: string; claimed: boolean } | null;
  }
}

/** The principal (key or signed-in user) of a request that passed the auth hook. */
export function authOf(request: { auth: Principal | null }): Principal {
  if (!request.auth) throw new Error('route reached without authentication');
  return request.auth;
}

/** The signed-in user of a console operation that passed the auth hook. */
export function userOf(request: { auth: Principal | null }): SessionPrincipal {
  const auth = authOf(request);
  if (auth.kind !== 'user') throw new Error('console route reached without a session');
  return auth;
}

/** Who acts and from where, for the audit log: the request's principal (when there is one), address and user agent. */
export function auditOf(request: { auth: Principal | null; ip: string; headers: Record<string, string | string[] | undefined> }): AuditContext {
  const a = request.auth;
  const ua = request.headers['user-agent'];
  return {
    actor: !a ? { type: 'anonymous' } : a.kind === 'user' ? { type: 'user', id: a.id, email: a.email } : { type: 'key', id: a.id },
    ip: request.ip,
    userAgent: typeof ua === 'string' ? ua : null,
  };
}
