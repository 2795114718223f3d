import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import type { ConsoleLimits } from '../../../lib/ratelimit';
import { auditOf, userOf } from '../../types';
import { SESSION_COOKIE } from '../../plugins/auth';
import { ErrorBody } from '../../schemas/common';
import { Accepted, ConsoleSession, LinkInfo, LinkTokenBody, PasswordResetBody, RedeemLinkBody, sessionErrors, SignInBody } from '../../schemas/console';
import { clearSessionCookie, sessionBody, setSessionCookie, signedInBody, signInGuard } from './cookie';

const tags = ['Console: sign-in'];
const foreignOrigin = ErrorBody.meta({ description: "csrf_failed: sent from another origin (the console's requests are same-origin only)" });
const limited = ErrorBody.meta({ description: 'rate_limited: too many requests from this address, or (sign-in) too many failures for this account: locked until Retry-After' });
const badLink = {
  404: ErrorBody.meta({ description: 'link_not_found: no such link' }),
  410: ErrorBody.meta({ description: 'link_expired: the link was already used or is past its expiry' }),
};

export interface ConsoleRouteOptions {
  services: Pick<Services, 'people' | 'sessions' | 'publicBaseUrl'>;
  limits: ConsoleLimits;
}

/** Sign-in, the session, sign-out (here and everywhere), password reset and one-time links. */
export const consoleSessionRoutes: FastifyPluginAsyncZod<ConsoleRouteOptions> = async (app, opts) => {
  const { people, sessions, publicBaseUrl } = opts.services;
  const guard = signInGuard(opts.limits);
  /** Where a request comes from, for the audit log (no principal yet, or the session's user, recorded by the service). */
  const from = (request: { ip: string; headers: Record<string, string | string[] | undefined> }) => {
    const { ip, userAgent } = auditOf({ auth: null, ip: request.ip, headers: request.headers });
    return { ip, userAgent };
  };

  app.post('/api/console/sign-in', {
    config: { console: 'public' },
    schema: {
      operationId: 'consoleSignIn',
      summary: 'Sign in with email and password: a new session (cookie) and its CSRF token',
      description: 'An unknown email and a wrong password both answer 401 invalid_credentials. A cookie sent with the request is never reused: every sign-in makes a new session.',
      tags,
      body: SignInBody,
      response: {
        200: ConsoleSession,
        401: ErrorBody.meta({ description: 'invalid_credentials: the email or the password is not recognised (the same answer for both); second_factor_required: the password is right, send totp_code too; invalid_totp_code: not the current code, or already used' }),
        403: ErrorBody.meta({ description: "csrf_failed: sent from another origin; totp_enrolment_required: the workspace requires a second factor this account lacks — `enrolment` {secret, otpauth_uri} holds a new secret: sign in again with its first code as totp_code" }),
        409: ErrorBody.meta({ description: 'workspace_required: the email and password open several workspaces; `workspaces` lists them, send workspace_id' }),
        429: limited,
      },
    },
    handler: async (request, reply) => {
      const signedIn = await people.signIn(request.body, from(request), guard);
      // The session a cookie named before this sign-in (if any) ends: one browser, one session.
      const previous = request.cookies[SESSION_COOKIE];
      if (previous) await sessions.revokeToken(previous);
      setSessionCookie(request, reply, publicBaseUrl, signedIn.session.token, signedIn.session.expiresAt);
      return signedInBody(signedIn, sessions);
    },
  });

  app.get('/api/console/session', {
    config: { console: 'session' },
    schema: { operationId: 'consoleGetSession', summary: 'The signed-in user, their workspace, scopes and the CSRF token', tags, response: { 200: ConsoleSession, ...sessionErrors } },
    handler: async (request) => {
      const p = userOf(request);
      const [user, workspace] = await Promise.all([people.get(p.workspaceId, p.id), people.workspaceOf(p.workspaceId)]);
      return sessionBody(p, user, workspace, sessions);
    },
  });

  app.post('/api/console/sign-out', {
    config: { console: 'session' },
    schema: { operationId: 'consoleSignOut', summary: 'End this session', tags, response: { 204: z.null().meta({ description: 'Signed out; the cookie is cleared' }), ...sessionErrors } },
    handler: async (request, reply) => {
      await sessions.revoke(userOf(request).sessionId);
      clearSessionCookie(request, reply, publicBaseUrl);
      return reply.code(204).send(null);
    },
  });

  app.post('/api/console/sign-out-everywhere', {
    config: { console: 'session' },
    schema: { operationId: 'consoleSignOutEverywhere', summary: "End every session of the signed-in user, this one included (audited)", tags, response: { 204: z.null().meta({ description: 'Every session ended; the cookie is cleared' }), ...sessionErrors } },
    handler: async (request, reply) => {
      await people.signOutEverywhere(userOf(request), from(request));
      clearSessionCookie(request, reply, publicBaseUrl);
      return reply.code(204).send(null);
    },
  });

  app.post('/api/console/password-reset', {
    config: { console: 'public' },
    schema: {
      operationId: 'consoleRequestPasswordReset',
      summary: 'Mail a one-time password-reset link (1 h) to the address, if it is a user’s',
      description: 'Always 202, whatever the email: the answer tells nothing about who has an account. Without SMTP_URL nothing is sent (an owner or admin can issue a link: POST /api/console/users/{id}/link).',
      tags,
      body: PasswordResetBody,
      response: { 202: Accepted, 403: foreignOrigin, 429: limited },
    },
    handler: async (request, reply) => {
      await people.requestPasswordReset(request.body.email, from(request), guard);
      return reply.code(202).send({ accepted: true });
    },
  });

  app.post('/api/console/links/inspect', {
    config: { console: 'public' },
    schema: { operationId: 'consoleInspectLink', summary: 'What a one-time link is for (sign-in, invitation, password reset); does not use it', tags, body: LinkTokenBody, response: { 200: LinkInfo, 403: foreignOrigin, ...badLink } },
    handler: async (request) => people.inspectLink(request.body.token),
  });

  app.post('/api/console/links/redeem', {
    config: { console: 'public' },
    schema: {
      operationId: 'consoleRedeemLink',
      summary: 'Use a one-time link: set the password and sign in (a reset also ends every other session)',
      tags,
      body: RedeemLinkBody,
      response: {
        200: ConsoleSession,
        400: ErrorBody.meta({ description: 'invalid_request, or weak_password: too short, too common, the email address, or too repetitive (the link is not used)' }),
        401: ErrorBody.meta({ description: 'second_factor_required, invalid_totp_code: a password reset of an account with a second factor needs its code (the link is not used)' }),
        403: ErrorBody.meta({ description: 'csrf_failed: sent from another origin; totp_enrolment_required: a reset in a workspace that requires a second factor the account lacks (`enrolment` holds the secret)' }),
        ...badLink,
        429: limited,
      },
    },
    handler: async (request, reply) => {
      const signedIn = await people.redeemLink(request.body.token, request.body, from(request), guard);
      const previous = request.cookies[SESSION_COOKIE];
      if (previous) await sessions.revokeToken(previous);
      setSessionCookie(request, reply, publicBaseUrl, signedIn.session.token, signedIn.session.expiresAt);
      return signedInBody(signedIn, sessions);
    },
  });
};
