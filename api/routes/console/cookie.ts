import type { FastifyReply, FastifyRequest } from 'fastify';
import type { SignedIn, SignInGuard } from '../../../domain/people/users';
import type { SessionPrincipal, SessionService } from '../../../domain/people/sessions';
import { ROLE_SCOPES } from '../../../domain/people/roles';
import type { ConsoleLimits } from '../../../lib/ratelimit';
import { DomainError } from '../../../lib/errors';
import { SESSION_COOKIE } from '../../plugins/auth';

/** Secure when the console is served over https (PUBLIC_BASE_URL, or the request as it arrived). */
const secure = (request: FastifyRequest, publicBaseUrl: string) => publicBaseUrl.startsWith('https:') || request.protocol === 'https';

/** The session cookie: HttpOnly (no script reads it), SameSite=Lax, Path=/ (the console and /api/v1), until the absolute expiry. */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, publicBaseUrl: string, token: string, expiresAt: Date): void {
  reply.setCookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: secure(request, publicBaseUrl),
    path: '/',
    maxAge: Math.max(1, Math.floor((expiresAt.getTime() - Date.now()) / 1000)),
  });
}

export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply, publicBaseUrl: string): void {
  reply.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'lax', secure: secure(request, publicBaseUrl), path: '/' });
}

/** A new sign-in: the session's body, with the cookie set (a new token: whatever cookie came in is not reused). */
export function signedInBody(signedIn: SignedIn, sessions: SessionService) {
  const { user, workspace, session } = signedIn;
  return {
    user,
    workspace,
    scopes: [...ROLE_SCOPES[user.role]],
    csrf_token: session.csrfToken,
    expires_at: session.expiresAt.toISOString(),
    idle_expires_at: new Date(Math.min(Date.now() + sessions.settings.idleMs, session.expiresAt.getTime())).toISOString(),
  };
}

/** The current session's body (GET /api/console/session). */
export function sessionBody(p: SessionPrincipal, user: SignedIn['user'], workspace: SignedIn['workspace'], sessions: SessionService) {
  return {
    user,
    workspace,
    scopes: [...p.scopes],
    csrf_token: p.csrfToken,
    expires_at: p.expiresAt.toISOString(),
    idle_expires_at: sessions.idleExpiry(p).toISOString(),
  };
}

/** Sign-in's limits over the shared rate store: attempts per client address, failures per account (the lockout). */
export function signInGuard(limits: ConsoleLimits): SignInGuard {
  return {
    admit: async (address, email) => {
      const d = await limits.attemptsPerAddress.consume(`address:${address}`);
      if (!d.allowed) {
        const retryAfter = Math.max(1, Math.ceil(d.resetMs / 1000));
        throw new DomainError('rate_limited', `Too many sign-in, link and password-reset requests from this address: at most ${d.limit} in ${limits.windowSeconds} s; retry in ${retryAfter} s`, {}, { retryAfterSeconds: retryAfter });
      }
      if (email !== undefined) await limits.failuresPerAccount.check(`account:${email}`, 'this account');
    },
    failed: (email) => limits.failuresPerAccount.fail(`account:${email}`),
    succeeded: (email) => limits.failuresPerAccount.reset(`account:${email}`),
  };
}
