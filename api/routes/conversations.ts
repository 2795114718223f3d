import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../app/services';
import type { DialOutLimits } from '../../lib/ratelimit';
import { authOf } from '../types';
import { authErrors, ErrorBody, IdParam, idParam } from '../schemas/common';
import {
  Call,
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

export const conversationRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'conversations' | 'transcript' | 'calls' | 'dialOut'>; dialOut: DialOutLimits }> = async (app, opts) => {
  const conversations = opts.services.conversations;
  const calls = opts.services.calls;

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
        "channel web: stored in the conversation's transcript as written by a human (the widget's history shows author: human) and pushed to the visitor's open sockets as a reply with unsolicited: true. msgapp: use POST /api/v1/messages (400). voice: dial-out, the agent phones `to` (201 with the call, status calling; follow it with GET /api/v1/calls/{id}). Its checks, in order: the agent (404, 422 agent_not_published), its web_chat.dial_out toggle (403 dial_out_not_enabled), the number and the workspace's destination policy (400 invalid_phone_number with the reason: premium-rate, shared-cost, unknown type, non-geographic global network such as +870 Inmarsat, a type or country the workspace does not allow), what this installation lacks (503 dial_out_prereq_failed), the conversation (404, 409), the calls to that number in the window across all workspaces (429 rate_limited with Retry-After, DIAL_OUT_CALLS_PER_DESTINATION), the workspace's concurrent voice sessions and calls (429 concurrent_voice_limit_reached) and credits (402 out_of_credits: the first minute is paid now, at the price of the number's class: fixed, mobile or other).",
      tags,
      body: OutboundBody,
      response: {
        201: z.union([OutboundMessage, Call]).meta({ description: 'web: the stored message; voice: the call placed (status calling)' }),
        ...authErrors,
        400: ErrorBody.meta({ description: 'invalid_request, invalid_phone_number (voice; the message says why: not a number, premium-rate, shared-cost, unknown type, non-geographic/satellite, a type or country the workspace does not allow)' }),
        402: ErrorBody.meta({ description: 'out_of_credits (voice): the workspace cannot pay the first minute' }),
        403: ErrorBody.meta({ description: "dial_out_not_enabled (voice): the agent's web_chat.dial_out is off" }),
        404: ErrorBody.meta({ description: 'not_found: no such conversation (or, voice, agent) in this workspace' }),
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        422: ErrorBody.meta({ description: 'agent_not_published (voice)' }),
        429: ErrorBody.meta({ description: 'concurrent_voice_limit_reached (voice), rate_limited (with Retry-After; voice: also the calls to one number per DIAL_OUT_WINDOW_SECONDS)' }),
        503: ErrorBody.meta({ description: 'dial_out_prereq_failed (voice, with the reason), workflow_unavailable' }),
      },
    },
    handler: async (request, reply) => {
      const body = request.body;
      const workspaceId = authOf(request).workspaceId;
      // One call per channel: the call placed and read back (voice), the human's message stored and pushed (web).
      const created = body.channel === 'voice' ? await opts.services.dialOut.fromApi(workspaceId, body, opts.dialOut) : await opts.services.transcript.humanMessage(workspaceId, body);
      return reply.code(201).send(created);
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

  app.get('/api/v1/calls', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'listCalls', summary: 'Dial-out calls, newest first', tags, querystring: PageQuery, response: { 200: CallList, ...authErrors } },
    handler: async (request) => calls.list(authOf(request).workspaceId, request.query),
  });

  app.get('/api/v1/calls/:id', {
    config: { scope: 'conversations:read' },
    schema: { operationId: 'getCall', summary: 'A call: its status history, duration and recordings', tags, params: IdParam, response: { 200: Call, ...authErrors, 404: ErrorBody } },
    handler: async (request) => calls.get(authOf(request).workspaceId, request.params.id),
  });

  app.post('/api/v1/calls/:id/hangup', {
    config: { scope: 'conversations:write' },
    schema: {
      operationId: 'hangUpCall',
      summary: 'Hang up a call',
      description:
        'Ends a call that is calling, ringing or in progress: before the answer the dial is abandoned (SIP CANCEL; the call ends failed, error "hung up before the call was answered", its first minute refunded), after it the phone leg is hung up (SIP BYE; the call ends completed). Answers once the call has ended and its recordings are saved (up to 20 s; past that, the call as it is then, still ending). Idempotent, as POST /voice/stop: a call that has already ended is answered as it is (200), its status unchanged. No body.',
      tags,
      params: IdParam,
      response: {
        200: Call.meta({ description: 'The call, ended (or, past the wait, still ending)' }),
        ...authErrors,
        404: ErrorBody.meta({ description: 'not_found: no such call in this workspace' }),
        503: ErrorBody.meta({ description: 'workflow_unavailable' }),
      },
    },
    handler: async (request) => calls.hangUp(authOf(request).workspaceId, request.params.id),
  });

  app.get('/api/v1/conversations/:id/recordings', {
    config: { scope: 'conversations:read' },
    schema: {
      operationId: 'listConversationRecordings',
      summary: "A conversation's recordings (voice sessions and calls) with signed download links",
      tags,
      params: ConvId,
      response: { 200: RecordingList, ...authErrors, 404: ErrorBody },
    },
    handler: async (request) => ({ recordings: await calls.recordingsOfConversation(authOf(request).workspaceId, request.params.id) }),
  });
};
