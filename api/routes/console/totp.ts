import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors, UserId } from '../../schemas/console';
import { TotpCodeBody, TotpEnrolment, TotpPolicy, TotpPolicyBody, TotpStatus } from '../../schemas/console-totp';
import { auditOf, userOf } from '../../types';

const tags = ['Console: second factor'];

/** TOTP as an optional second factor: the signed-in user enrols; an owner requires it; an owner or admin resets a person's. */
export const consoleTotpRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'totp'> }> = async (app, opts) => {
  const { totp } = opts.services;

  app.get('/api/console/totp', {
    config: { console: 'session' },
    schema: { operationId: 'consoleGetTotp', summary: "Whether the signed-in user has a second factor, and whether the workspace requires one", tags, response: { 200: TotpStatus, ...sessionErrors } },
    handler: async (request) => totp.status(userOf(request)),
  });

  app.post('/api/console/totp/enrol', {
    config: { console: 'session' },
    schema: {
      operationId: 'consoleEnrolTotp',
      summary: 'Start enrolling a second factor: a new secret, shown once (as otpauth:// and as text); confirm it with a first code',
      tags,
      response: { 201: TotpEnrolment, ...sessionErrors, 409: ErrorBody.meta({ description: 'totp_already_enrolled: reset it first (an owner or admin)' }) },
    },
    handler: async (request, reply) => reply.code(201).send(await totp.begin(userOf(request))),
  });

  app.post('/api/console/totp/confirm', {
    config: { console: 'session' },
    schema: {
      operationId: 'consoleConfirmTotp',
      summary: "Confirm the secret with the app's first code: from then on every password sign-in asks for a code (audited)",
      tags,
      body: TotpCodeBody,
      response: {
        200: TotpStatus,
        400: ErrorBody.meta({ description: 'invalid_request: no enrolment was started' }),
        401: ErrorBody.meta({ description: 'invalid_totp_code: not the current code of the secret; not_signed_in' }),
        403: sessionErrors[403],
        409: ErrorBody.meta({ description: 'totp_already_enrolled' }),
        429: sessionErrors[429],
      },
    },
    handler: async (request) => {
      const p = userOf(request);
      await totp.confirm(p, request.body.code, auditOf(request));
      return totp.status(p);
    },
  });

  app.put('/api/console/totp/policy', {
    config: { console: 'session', permission: 'manageSignInPolicy' },
    schema: {
      operationId: 'consoleSetTotpPolicy',
      summary: 'Require (or stop requiring) a second factor at every password sign-in of the workspace (owner; audited)',
      description: 'Those without one are asked to enrol at their next password sign-in (403 totp_enrolment_required, then a first code). SSO sign-ins leave the second factor to the identity provider.',
      tags,
      body: TotpPolicyBody,
      response: { 200: TotpPolicy, ...sessionErrors, 403: ErrorBody.meta({ description: 'forbidden: only an owner; csrf_failed' }) },
    },
    handler: async (request) => totp.setRequired(userOf(request).workspaceId, request.body.required, auditOf(request)),
  });

  app.delete('/api/console/users/:id/totp', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: {
      operationId: 'consoleResetUserTotp',
      summary: "Recovery: remove a person's second factor, so they sign in with their password and may enrol again (owner or admin; only an owner for an owner; audited)",
      tags,
      params: UserId,
      response: { 204: z.null().meta({ description: 'Reset' }), ...sessionErrors, 403: ErrorBody.meta({ description: "forbidden: an admin resetting an owner's, or a role that manages no people; csrf_failed" }), 404: ErrorBody.meta({ description: 'not_found: no such user, or no second factor' }) },
    },
    handler: async (request, reply) => {
      const p = userOf(request);
      await totp.reset(p, p.workspaceId, request.params.id, auditOf(request));
      return reply.code(204).send(null);
    },
  });
};
