import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { SSO_FLOW_TTL_MS, SsoError, type SsoFailure } from '../../../domain/people/sso';
import { DomainError } from '../../../lib/errors';
import type { ConsoleLimits } from '../../../lib/ratelimit';
import { SESSION_COOKIE } from '../../plugins/auth';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { SsoCallbackQuery, SsoSettingsAnswer, SsoSettingsBody, SsoSettingsView, SsoStartQuery } from '../../schemas/console-sso';
import { auditOf, userOf } from '../../types';
import { setSessionCookie, signInGuard } from './cookie';

const tags = ['Console: SSO'];
/** The sign-in in progress between start and callback: sealed (AES-256-GCM) by the service, HttpOnly, only sent to /api/console/sso/. */
export const SSO_FLOW_COOKIE = 'concierge_sso';
const FLOW_PATH = '/api/console/sso/';
const forbidden = ErrorBody.meta({ description: "forbidden: only an owner manages SSO; csrf_failed: without the session's X-CSRF-Token or from another origin" });
const redirect = (description: string) => z.null().meta({ description });

/** OpenID Connect sign-in: the owner's settings, and the browser's round trip through the IdP (errors land on the sign-in page). */
export const consoleSsoRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'sso' | 'sessions' | 'publicBaseUrl'>; limits: ConsoleLimits }> = async (app, opts) => {
  const { sso, sessions, publicBaseUrl } = opts.services;
  const guard = signInGuard(opts.limits);
  const secure = (request: FastifyRequest) => publicBaseUrl.startsWith('https:') || request.protocol === 'https';
  const console = (path: string) => new URL(path, publicBaseUrl).pathname;
  /** Where a refused sign-in lands: the console's sign-in page, which shows the code. */
  const toSignIn = (reply: FastifyReply, code: SsoFailure) => reply.code(303).header('location', `${console('/console/sign-in')}?error=${code}`).header('cache-control', 'no-store').send(null);
  const from = (request: FastifyRequest) => {
    const { ip, userAgent } = auditOf({ auth: null, ip: request.ip, headers: request.headers });
    return { ip, userAgent };
  };
  /** A refusal of the flow (SsoError, the address's limit) as the sign-in page's code; anything else is a fault. */
  const failure = (err: unknown): SsoFailure => {
    if (err instanceof SsoError) return err.code;
    if (err instanceof DomainError && err.code === 'rate_limited') return 'rate_limited';
    throw err;
  };

  app.get('/api/console/sso', {
    config: { console: 'session', permission: 'manageSso' },
    schema: { operationId: 'consoleGetSso', summary: "The workspace's OpenID Connect sign-in settings (owner); the client secret only as its last four", tags, response: { 200: SsoSettingsAnswer, ...sessionErrors, 403: forbidden } },
    handler: async (request) => ({ sso: await sso.get(userOf(request).workspaceId) }),
  });

  app.put('/api/console/sso', {
    config: { console: 'session', permission: 'manageSso' },
    schema: {
      operationId: 'consolePutSso',
      summary: "Set the workspace's OpenID Connect sign-in (owner; audited as sso.settings_changed, without the secret)",
      tags,
      body: SsoSettingsBody,
      response: {
        200: SsoSettingsView,
        ...sessionErrors,
        403: forbidden,
        409: ErrorBody.meta({ description: "sso_domain_taken: one of the email domains is served by another workspace's SSO" }),
      },
    },
    handler: async (request) => sso.put(userOf(request).workspaceId, request.body, auditOf(request)),
  });

  app.delete('/api/console/sso', {
    config: { console: 'session', permission: 'manageSso' },
    schema: {
      operationId: 'consoleDeleteSso',
      summary: "Remove the workspace's SSO and its email domains (owner; audited). People bound to the IdP keep their bindings",
      tags,
      response: { 204: z.null().meta({ description: 'Removed' }), ...sessionErrors, 403: forbidden, 404: ErrorBody.meta({ description: 'not_found: no SSO is set up' }) },
    },
    handler: async (request, reply) => {
      await sso.remove(userOf(request).workspaceId, auditOf(request));
      return reply.code(204).send(null);
    },
  });

  app.get('/api/console/sso/start', {
    config: { console: 'public' },
    schema: {
      operationId: 'consoleStartSso',
      summary: "Sign in with SSO: a browser navigation, redirected to the IdP of the workspace the email's domain names",
      description:
        "303 to the IdP's authorization endpoint (PKCE S256, state, nonce; the sign-in in progress kept sealed in an HttpOnly cookie for /api/console/sso/, 10 minutes). An unknown domain and a disabled SSO both land on /console/sign-in?error=sso_unavailable.",
      tags,
      querystring: SsoStartQuery,
      response: { 303: redirect("To the IdP, or to /console/sign-in?error=<code> (sso_unavailable, sso_failed, rate_limited)") },
    },
    handler: async (request, reply) => {
      try {
        await guard.admit(request.ip);
        const { authorizationUrl, flow } = await sso.start(request.query.email);
        reply.setCookie(SSO_FLOW_COOKIE, flow, { httpOnly: true, sameSite: 'lax', secure: secure(request), path: FLOW_PATH, maxAge: SSO_FLOW_TTL_MS / 1000 });
        return reply.code(303).header('location', authorizationUrl).header('cache-control', 'no-store').send(null);
      } catch (err) {
        return toSignIn(reply, failure(err));
      }
    },
  });

  app.get('/api/console/sso/callback', {
    config: { console: 'public' },
    schema: {
      operationId: 'consoleSsoCallback',
      summary: "The IdP's redirect back: the code exchanged, the ID token checked, a new session (cookie), then /console/",
      description:
        'Only identities whose email the IdP says is verified; users are bound by (issuer, subject). Refusals land on /console/sign-in?error=<code>: sso_failed, sso_expired, sso_unavailable, sso_email_unverified, sso_email_domain, sso_account_conflict, sso_user_removed, rate_limited.',
      tags,
      querystring: SsoCallbackQuery,
      response: { 303: redirect('To /console/ signed in (Set-Cookie concierge_session), or to /console/sign-in?error=<code>') },
    },
    handler: async (request, reply) => {
      // The flow is spent whatever happens: a second use of this browser's flow finds none.
      reply.clearCookie(SSO_FLOW_COOKIE, { httpOnly: true, sameSite: 'lax', secure: secure(request), path: FLOW_PATH });
      try {
        await guard.admit(request.ip);
        const callbackUrl = new URL(sso.redirectUri);
        callbackUrl.search = new URL(request.url, 'http://callback.invalid').search;
        const signedIn = await sso.callback(request.cookies[SSO_FLOW_COOKIE], callbackUrl, from(request));
        // As at a password sign-in: the session the browser's previous cookie named ends (no fixation).
        const previous = request.cookies[SESSION_COOKIE];
        if (previous) await sessions.revokeToken(previous);
        setSessionCookie(request, reply, publicBaseUrl, signedIn.session.token, signedIn.session.expiresAt);
        return reply.code(303).header('location', console('/console/')).header('cache-control', 'no-store').send(null);
      } catch (err) {
        return toSignIn(reply, failure(err));
      }
    },
  });
};
