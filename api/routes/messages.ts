import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import { authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { ListMessagesQuery, Message, MessageList, SendMessageBody, SendResult } from '../schemas/messages';

const MsgId = idParam('msg');

const tags = ['Messages'];

export const messageRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'messages' | 'outbound'> }> = async (app, opts) => {
  app.post('/api/v1/messages', {
    config: { scope: 'conversations:write' },
    schema: {
      operationId: 'sendMessage',
      summary: 'Send a text, media, location or template message on msgapp; 201 once the provider accepted it',
      tags,
      body: SendMessageBody,
      response: {
        201: SendResult,
        ...authErrors,
        404: ErrorBody.meta({ description: 'not_found: no published agent claims `from`, or an unknown agent_id / customer_id' }),
        422: ErrorBody.meta({
          description: 'ambiguous_sender (agent_ids), agent_not_published, sender_not_authorized, sender_agent_invalid (reasons), session_window_closed, template_not_approved',
        }),
        502: ErrorBody.meta({ description: 'provider_error: the provider refused or could not be reached; the message is recorded as failed (message_id)' }),
        503: ErrorBody.meta({ description: 'messaging_unavailable: no provider or workflow service configured' }),
      },
    },
    handler: async (request, reply) => reply.code(201).send(await opts.services.outbound.send(authOf(request).workspaceId, request.body)),
  });

  app.get('/api/v1/messages', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listMessages', summary: 'Messages sent through the API, newest first', tags, querystring: ListMessagesQuery, response: { 200: MessageList, ...authErrors } },
    handler: async (request) => opts.services.messages.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/messages/:id', {
    config: { scope: 'conversations:read' },
    schema: {
      operationId: 'getMessage',
      summary: 'Read one message with its status history',
      description:
        'Outbound messages, once the provider answered the send (status sent, delivered, read or failed). A message still being sent, and an inbound message (see `message.inbound` and the conversation events), are 404 here.',
      tags,
      params: MsgId,
      response: { 200: Message, ...authErrors, 404: ErrorBody.meta({ description: 'not_found: no such outbound message in this workspace, or it is still being sent' }) },
    },
    handler: async (request) => opts.services.messages.get(authOf(request).workspaceId, request.params.id),
  });
};
