import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import type { Services } from '../../core/services';
import { ApiError } from '../../core/errors';
import { authOf } from '../types';
import { authErrors, ErrorBody, IdParam, idParam } from '../schemas/common';
import { CallList, CaseList, Conversation, ConversationEvents, ConversationList, ListConversationsQuery, PageQuery, RecordingList } from '../schemas/conversations';

const ConvId = idParam('conv');

const tags = ['Conversations'];

export const conversationRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'conversations'> }> = async (app, opts) => {
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
