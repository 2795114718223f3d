import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { auditOf, userOf } from '../../types';
import { ErrorBody } from '../../schemas/common';
import { ConsoleUser, ConsoleUserList, Invitation, InviteBody, IssuedLink, sessionErrors, UpdateUserBody, UserId } from '../../schemas/console';

const tags = ['Console: people'];
const notFound = ErrorBody.meta({ description: 'not_found: no such user in this workspace' });
const forbidden = ErrorBody.meta({ description: "forbidden: the role may not manage people (owner and admin may), or only an owner may grant, take or touch the owner role; csrf_failed: without the session's X-CSRF-Token or from another origin" });
const lastOwner = ErrorBody.meta({ description: "last_owner: the workspace's last owner can be neither removed nor demoted" });

/** The workspace's people: list, invite (one-time link, mailed when SMTP is set up), change a role, remove, issue a new link. */
export const consoleUserRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'people'> }> = async (app, opts) => {
  const { people } = opts.services;

  app.get('/api/console/users', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: { operationId: 'consoleListUsers', summary: "The workspace's console users", tags, response: { 200: ConsoleUserList, ...sessionErrors, 403: forbidden } },
    handler: async (request) => people.list(userOf(request).workspaceId),
  });

  app.post('/api/console/users', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: {
      operationId: 'consoleInviteUser',
      summary: 'Invite someone: a user with a one-time invitation link (24 h), mailed when SMTP is set up and returned here either way',
      tags,
      body: InviteBody,
      response: { 201: Invitation, ...sessionErrors, 403: forbidden, 409: ErrorBody.meta({ description: 'email_taken: already a user of this workspace' }) },
    },
    handler: async (request, reply) => {
      const p = userOf(request);
      return reply.code(201).send(await people.create(p, p.workspaceId, request.body, auditOf(request), 'invitation'));
    },
  });

  app.patch('/api/console/users/:id', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: { operationId: 'consoleUpdateUser', summary: "Change a user's role", tags, params: UserId, body: UpdateUserBody, response: { 200: ConsoleUser, ...sessionErrors, 403: forbidden, 404: notFound, 409: lastOwner } },
    handler: async (request) => {
      const p = userOf(request);
      return people.changeRole(p, p.workspaceId, request.params.id, request.body.role, auditOf(request));
    },
  });

  app.delete('/api/console/users/:id', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: { operationId: 'consoleRemoveUser', summary: 'Remove a user (their sessions end at once)', tags, params: UserId, response: { 204: z.null().meta({ description: 'Removed' }), ...sessionErrors, 403: forbidden, 404: notFound, 409: lastOwner } },
    handler: async (request, reply) => {
      const p = userOf(request);
      await people.remove(p, p.workspaceId, request.params.id, auditOf(request));
      return reply.code(204).send(null);
    },
  });

  app.post('/api/console/users/:id/link', {
    config: { console: 'session', permission: 'manageUsers' },
    schema: {
      operationId: 'consoleIssueUserLink',
      summary: 'A new one-time link for a user: an invitation while they have no password, else a password reset (1 h); mailed when SMTP is set up, returned here either way',
      tags,
      params: UserId,
      response: { 201: z.object({ link: IssuedLink, emailed: z.boolean() }).meta({ id: 'ConsoleUserLink' }), ...sessionErrors, 403: forbidden, 404: notFound },
    },
    handler: async (request, reply) => {
      const p = userOf(request);
      return reply.code(201).send(await people.issueLink(p, p.workspaceId, request.params.id, auditOf(request)));
    },
  });
};
