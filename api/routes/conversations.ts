import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../core/services';
import { ApiError } from '../../core/errors';
import { authOf } from '../types';
import { authErrors, ErrorBody, IdParam, idParam } from '../schemas/common';
import {
  CallList,
  CaseList,
  Conversation,
  ConversationEvents,
  ConversationList,
  ListConversationsQuery,
  OutboundBody,
  OutboundMessage,
  PageQuery,
  RecordingList,
  UpdateConversationBody,
} from '../schemas/conversations';

const ConvId = idParam('conv');

const tags = ['Conversations'];

export const conversationRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'conversations' | 'transcript'> }> = async (app, opts) => {
  const conversations = opts.services.conversations;

  app.get('/api/v1/conversations', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listConversations', summary: 'List conversations, newest first', tags, querystring: ListConversationsQuery, response: { 200: ConversationList, ...authErrors } },
    handler: async (request) => conversations.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/conversations/:id', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'getConversation', summary: 'Get a conversation', tags, params: ConvId, response: { 200: Conversation, ...authErrors, 404: ErrorBody } },
    handler: async (request) => conversations.get(authOf(request).workspaceId, request.params.id),
  });

  app.patch('/api/v1/conversations/:id', {
    config: { scope: 'conversations:write' },
    schema: {
      operationId: 'updateConversation',
      summary: 'Hand a conversation to a human (needs_human: true) or resolve its case (false)',
      description:
        'While needs_human is true the agent does not answer: inbound messages are recorded and emitted, a widget sync send answers 200 with the visitor message id and empty text, an async one 202; a human writes with POST /api/v1/outbound (web) or POST /api/v1/messages (msgapp). The timeline records handoff / case_resolved.',
      tags,
      params: ConvId,
      body: UpdateConversationBody,
      response: { 200: Conversation, ...authErrors, 404: ErrorBody },
    },
    handler: async (request) => conversations.setNeedsHuman(authOf(request).workspaceId, request.params.id, request.body.needs_human, request.body.case_reason),
  });

  app.post('/api/v1/outbound', {
    config: { scope: 'conversations:write' },
    schema: {
      operationId: 'startOutbound',
      summary: "A human agent's message on a channel other than msgapp",
      description:
        "channel web: stored in the conversation's transcript as written by a human (the widget's history shows author: human) and pushed to the visitor's open sockets as a reply with unsolicited: true. msgapp: use POST /api/v1/messages (400). voice: dial-out is not built yet (501 not_implemented).",
      tags,
      body: OutboundBody,
      response: {
        201: OutboundMessage,
        ...authErrors,
        404: ErrorBody.meta({ description: 'not_found: no such conversation in this workspace' }),
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        501: ErrorBody.meta({ description: 'not_implemented: voice dial-out' }),
      },
    },
    handler: async (request, reply) => {
      const body = request.body;
      if (body.channel === 'msgapp') throw new ApiError(400, 'invalid_request', 'channel: msgapp messages are sent with POST /api/v1/messages');
      if (body.channel === 'voice') throw new ApiError(501, 'not_implemented', 'Voice dial-out is not built yet (see the README)');
      return reply.code(201).send(await opts.services.transcript.humanMessage(authOf(request).workspaceId, { conversation_id: body.conversation_id, text: body.text }));
    },
  });

  app.get('/api/v1/conversations/:id/events', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listConversationEvents', summary: 'The timeline of messages and status changes, oldest first', tags, params: ConvId, querystring: PageQuery, response: { 200: ConversationEvents, ...authErrors, 404: ErrorBody } },
    handler: async (request) => conversations.events(authOf(request).workspaceId, request.params.id, request.query),
  });

  app.get('/api/v1/cases', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listCases', summary: 'Conversations flagged for human follow-up', tags, querystring: PageQuery, response: { 200: CaseList, ...authErrors } },
    handler: async (request) => {
      const page = await conversations.list(authOf(request).workspaceId, { ...request.query, cases: true });
      return { cases: page.conversations, next_cursor: page.next_cursor };
    },
  });

  // Voice is not built yet: these answer well-formed empty results.
  app.get('/api/v1/calls', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listCalls', summary: 'Calls (voice is not built yet: always empty)', tags, response: { 200: CallList, ...authErrors } },
    handler: async () => ({ calls: [], next_cursor: null }),
  });

  app.get('/api/v1/calls/:id', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'getCall', summary: 'A call (voice is not built yet: always 404)', tags, params: IdParam, response: { ...authErrors, 404: ErrorBody } },
    handler: async (request) => {
      throw new ApiError(404, 'not_found', `No call with id '${request.params.id}' in this workspace`);
    },
  });

  app.get('/api/v1/conversations/:id/recordings', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listConversationRecordings', summary: 'Recordings (voice is not built yet: always empty)', tags, params: ConvId, response: { 200: RecordingList, ...authErrors, 404: ErrorBody } },
    handler: async (request) => {
      await conversations.get(authOf(request).workspaceId, request.params.id);
      return { recordings: [] };
    },
  });
};
