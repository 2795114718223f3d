import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { RichBlocks } from '../../../domain/chat/rich';
import type { Services } from '../../../app/services';
import { z } from 'zod';
import { enforce, type RateLimiter } from '../../../lib/ratelimit';
import { ErrorBody } from '../../schemas/common';
import { Card, Chart, Citation } from '../../../domain/chat/elements';
import { IdentityQuery, UserContext, conversationErrors, identityOf, tags, widgetErrors } from './common';
import { BLANK } from '../../../lib/text';

const Extras = {
  attachments: z.array(z.unknown()).optional(),
  charts: z.array(Chart).optional(),
  cards: z.array(Card).optional(),
  rich: RichBlocks.optional(),
  suggested_actions: z.array(z.string()).optional(),
  citations: z.array(Citation).optional(),
};

const SendBody = z
  .object({
    conversation_id: z.string().min(1).max(100),
    customer_id: z.string().max(100).optional(),
    text: z.string().max(10_000).default(''),
    file_refs: z.array(z.string().min(1).max(100)).max(5, 'at most 5 uploads per message').optional(),
    user_context: UserContext.optional(),
    delivery: z.enum(['sync', 'async']).default('sync'),
    client_message_id: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .meta({ description: "The client's id for this message; sending it again (a retry) never starts a second turn. Generated when absent." }),
  })
  .strict()
  // The contract's rule, checked by the handler: text may be empty (or blank) only when file_refs is present.
  .meta({ anyOf: [{ required: ['text'], properties: { text: { not: { pattern: BLANK.source } } } }, { required: ['file_refs'], properties: { file_refs: { minItems: 1 } } }] });
const SendSync = z.object({ message_id: z.string(), text: z.string(), ...Extras }).meta({ id: 'WidgetReply' });
const SendAccepted = z.object({ accepted: z.literal(true), message_id: z.string(), reply_id: z.string(), server_time: z.string() }).meta({ id: 'WidgetSendAccepted' });

const ContactBody = z
  .object({
    conversation_id: z.string().min(1).max(100),
    customer_id: z.string().max(100).optional(),
    email: z.email().max(254).meta({ description: 'Where the visitor can be reached; kept unverified' }),
    user_context: UserContext.optional(),
  })
  .strict();
const ContactStored = z.object({ stored: z.literal(true), email: z.string() }).meta({ id: 'WidgetContactStored' });

const HistoryQuery = z.object({
  conversation_id: z.string().max(100).optional(),
  limit: z.coerce.number().int().min(1).optional(),
  before: z.string().max(100).optional(),
  ...IdentityQuery,
});
export const HistoryMessage = z.object({
  id: z.string(),
  role: z.enum(['user', 'assistant']),
  text: z.string(),
  timestamp: z.string(),
  attachments: z.array(z.unknown()),
  author: z.literal('human').optional(),
  author_name: z.string().optional().meta({ description: "A human agent's name, when written with one" }),
  author_avatar_url: z.string().optional().meta({ description: "https URL of a human agent's picture, when given" }),
  charts: z.array(Chart).optional(),
  cards: z.array(Card).optional(),
  rich: RichBlocks.optional(),
  suggested_actions: z.array(z.string()).optional(),
  citations: z.array(Citation).optional(),
});
const History = z.object({ messages: z.array(HistoryMessage), has_more: z.boolean(), next_before: z.string().nullable() }).meta({ id: 'WidgetHistory' });

const ConversationsQuery = z.object({
  external_id: z.string().max(200).optional(),
  phone: z.string().max(32).optional(),
  email: z.string().max(320).optional(),
  user_hash: z
    .string()
    .max(200)
    .optional()
    .meta({
      description:
        'Hex HMAC-SHA256 keyed with the site secret of `<site_id>.<external_id>`, `<site_id>.phone:<phone>` or `<site_id>.email:<email>`: the hash names the kind of identity it proves',
    }),
  limit: z.coerce.number().int().min(1).max(100).default(30),
});
const ConversationList = z
  .object({ conversations: z.array(z.object({ conversation_id: z.string(), title: z.string(), preview: z.string(), updated_at: z.string() })) })
  .meta({ id: 'WidgetConversations' });
const NewBody = z.object({ user_context: UserContext.optional(), conversation_id: z.string().max(100).optional() }).strict();
const ConversationRef = z.object({ conversation_id: z.string(), customer_id: z.string() });

const Task = z.object({ task_key: z.string(), label: z.string(), status: z.enum(['running', 'completed', 'cancelled', 'failed']), blocking: z.boolean(), started_at: z.string() });
const TasksQuery = z.object({ conversation_id: z.string().min(1).max(100), ...IdentityQuery });
const CancelBody = z.object({ conversation_id: z.string().min(1).max(100), task_key: z.string().min(1).max(200), user_context: UserContext.optional() }).strict();

const HISTORY_MAX = 200;

/** Send, history, conversations, tasks: the visitor's side of the conversation actor. */
export const chatRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'widget' | 'widgetChat'>; sends: RateLimiter }> = async (app, opts) => {
  app.post('/api/public/widget/send', {
    config: { site: true },
    schema: {
      operationId: 'widgetSend',
      summary: 'Send a visitor message and run the agent (sync: the reply in the response; async: 202, the reply on the socket)',
      tags,
      security: [{ widgetSite: [] }],
      body: SendBody,
      response: {
        200: SendSync,
        202: SendAccepted,
        ...widgetErrors,
        ...conversationErrors,
        429: ErrorBody.meta({ description: 'rate_limited: more than 30 sends a minute in the conversation, or 300 requests a minute from one client address (Retry-After)' }),
        409: ErrorBody.meta({ description: 'task_in_progress (with `label`): a blocking background task runs; conversation_closed' }),
        502: ErrorBody.meta({ description: 'workflow_execution_failed: the agent could not answer' }),
      },
    },
    handler: async (request, reply) => {
      const answer = await opts.services.widgetChat.send(request.site!, request.body, { limitSends: (id) => enforce(opts.sends, id, 'sends per conversation'), log: request.log });
      return answer.status === 202 ? reply.code(202).send(answer.body) : reply.code(200).send(answer.body);
    },
  });

  app.post('/api/public/widget/contact', {
    config: { site: true },
    schema: {
      operationId: 'widgetLeaveContact',
      summary: 'Leave an email for the team (when nobody is available to answer now)',
      description:
        "Stored on the conversation's customer as unverified (never an identity: it opens no history and merges no customer) and on the conversation's timeline as a contact_email event; the team's answer is written into the conversation. Sending again replaces the email.",
      tags,
      security: [{ widgetSite: [] }],
      body: ContactBody,
      response: {
        200: ContactStored,
        ...widgetErrors,
        ...conversationErrors,
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        429: ErrorBody.meta({ description: 'rate_limited: more than 30 sends a minute in the conversation, or 300 requests a minute from one client address (Retry-After)' }),
      },
    },
    handler: async (request) => opts.services.widgetChat.leaveContact(request.site!, request.body, (id) => enforce(opts.sends, id, 'sends per conversation')),
  });

  app.get('/api/public/widget/history', {
    config: { site: true },
    schema: {
      operationId: 'widgetHistory',
      summary: 'Page the transcript: the latest `limit` messages older than `before`, oldest first',
      tags,
      security: [{ widgetSite: [] }],
      querystring: HistoryQuery,
      response: { 200: History, ...widgetErrors, ...conversationErrors },
    },
    handler: async (request) => {
      const q = request.query;
      return opts.services.widgetChat.history(request.site!, { conversation_id: q.conversation_id, before: q.before, user_context: identityOf(q) }, Math.min(q.limit ?? 20, HISTORY_MAX));
    },
  });

  app.get('/api/public/widget/conversations', {
    config: { site: true },
    schema: {
      operationId: 'widgetConversations',
      summary: "A verified visitor's conversations, newest first (anyone else: an empty list)",
      tags,
      security: [{ widgetSite: [] }],
      querystring: ConversationsQuery,
      response: { 200: ConversationList, ...widgetErrors },
    },
    handler: async (request) => ({ conversations: await opts.services.widget.conversations(request.site!, request.query) }),
  });

  app.post('/api/public/widget/conversations/new', {
    config: { site: true },
    schema: {
      operationId: 'widgetConversationsNew',
      summary: "Close the visitor's open conversation and start a fresh one",
      tags,
      security: [{ widgetSite: [] }],
      body: NewBody.optional(),
      response: { 201: ConversationRef.meta({ description: 'The fresh conversation (created)' }), ...widgetErrors, ...conversationErrors },
    },
    handler: async (request, reply) => reply.code(201).send(await opts.services.widgetChat.startNew(request.site!, request.body)),
  });

  app.get('/api/public/widget/tasks', {
    config: { site: true },
    schema: {
      operationId: 'widgetTasks',
      summary: "The conversation's open background tasks",
      tags,
      security: [{ widgetSite: [] }],
      querystring: TasksQuery,
      response: { 200: z.object({ tasks: z.array(Task) }).meta({ id: 'WidgetTasks' }), ...widgetErrors, ...conversationErrors },
    },
    handler: async (request) => opts.services.widgetChat.openTasks(request.site!, request.query.conversation_id, identityOf(request.query)),
  });

  app.post('/api/public/widget/tasks/cancel', {
    config: { site: true },
    schema: {
      operationId: 'widgetTasksCancel',
      summary: 'Cancel a background task of the conversation',
      tags,
      security: [{ widgetSite: [] }],
      body: CancelBody,
      response: { 200: z.object({ cancelled: z.boolean() }), ...widgetErrors, ...conversationErrors },
    },
    handler: async (request) => opts.services.widgetChat.cancelTask(request.site!, request.body.conversation_id, request.body.task_key, request.body.user_context),
  });
};
