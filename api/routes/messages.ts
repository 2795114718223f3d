import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../app/services';
import type { WorkflowClients } from '../../app/temporal-clients';
import { ApiError } from '../http-errors';
import { authOf } from '../types';
import { authErrors, ErrorBody, idParam } from '../schemas/common';
import { ListMessagesQuery, Message, MessageList, SendMessageBody, SendResult } from '../schemas/messages';

const MsgId = idParam('msg');

const tags = ['Messages'];

export const messageRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'messages'>; workflows: WorkflowClients | null }> = async (app, opts) => {
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
    handler: async (request, reply) => {
      const ws = authOf(request).workspaceId;
      if (!opts.workflows || !opts.services.messages.configured) {
        throw new ApiError(503, 'messaging_unavailable', 'Sending is not configured on this server (MSGAPP_API_BASE and a Temporal connection are needed)');
      }
      const plan = await opts.services.messages.plan(ws, request.body);
      const result = await opts.workflows.messages.send(plan);
      if (result.status === 'failed') {
        throw new ApiError(502, 'provider_error', `The provider did not accept the message: ${result.error}`, { message_id: plan.messageId });
      }
      const message = await opts.services.messages.get(ws, plan.messageId);
      return reply.code(201).send({
        id: message.id,
        conversation_id: message.conversation_id,
        agent_id: plan.agentId,
        channel: 'msgapp' as const,
        to: message.to,
        from: message.from,
        send_authorized: true,
        status: 'sent' as const,
        provider_message_id: result.providerMessageId,
      });
    },
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
