import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { CreateTicketBody, ListTicketsQuery, ReplyTicketBody, Ticket, TicketList } from '../schemas/support';

const TktId = idParam('tkt');
const tags = ['Support'];
const notFound = ErrorBody.meta({ description: 'not_found' });

export const supportRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'support'> }> = async (app, opts) => {
  const support = opts.services.support;

  app.post('/api/v1/support/tickets', {
    config: { scope: 'support:write' },
    schema: {
      operationId: 'createSupportTicket',
      summary: 'Raise a support ticket with the platform operator (status open)',
      tags,
      body: CreateTicketBody,
      response: { 201: Ticket, ...authErrors },
    },
    handler: async (request, reply) => reply.code(201).send(await support.create(authOf(request).workspaceId, request.body)),
  });

  app.get('/api/v1/support/tickets', {
    config: { scope: 'support:read' },
    schema: { operationId: 'listSupportTickets', summary: "List the workspace's tickets, newest first", tags, querystring: ListTicketsQuery, response: { 200: TicketList, ...authErrors } },
    handler: async (request) => support.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/support/tickets/:id', {
    config: { scope: 'support:read' },
    schema: { operationId: 'getSupportTicket', summary: 'Get a ticket with its thread', tags, params: TktId, response: { 200: Ticket, ...authErrors, 404: notFound } },
    handler: async (request) => support.get(authOf(request).workspaceId, request.params.id),
  });

  app.post('/api/v1/support/tickets/:id/reply', {
    config: { scope: 'support:write' },
    schema: {
      operationId: 'replySupportTicket',
      summary: 'Reply on a ticket (a ticket waiting on you becomes open again)',
      tags,
      params: TktId,
      body: ReplyTicketBody,
      response: { 201: Ticket, ...authErrors, 404: notFound, 409: ErrorBody.meta({ description: 'ticket_closed: a closed ticket takes no replies; open a new one' }) },
    },
    handler: async (request, reply) => reply.code(201).send(await support.reply(authOf(request).workspaceId, request.params.id, request.body.body)),
  });
};
