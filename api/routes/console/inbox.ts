import type { FastifyPluginAsyncZod } from '@fastify/type-provider-zod';
import { z } from 'zod';
import type { Services } from '../../../app/services';
import { ErrorBody } from '../../schemas/common';
import { sessionErrors } from '../../schemas/console';
import { HistoryMessage } from '../widget/chat';
import { RecordingDownload } from '../../schemas/conversations';
import {
  ActionBody,
  ActionResult,
  CannedReplyBody,
  CannedReplyId,
  CannedReplyList,
  CannedReplyPatch,
  CannedReplyView,
  CapacityBody,
  InboxConversation,
  InboxConversationId,
  InboxList,
  InboxQuery,
  InboxSettingsBody,
  InboxSettingsView,
  Note,
  Presence,
  PresenceBody,
  ReplyOptions,
  TeamList,
  UserIdParam,
} from '../../schemas/console-inbox';
import { ApiError } from '../../http-errors';
import type { InboxHub } from '../../inbox-hub';
import { userOf } from '../../types';
import { readSingleFile } from '../../multipart';
import { WIDGET_UPLOAD_MAX_BYTES } from '../../../domain/widget/uploads';

const tags = ['Console: inbox'];
const DEFAULT_GRACE_MS = 60_000;
const readForbidden = ErrorBody.meta({ description: "csrf_failed: without the session's X-CSRF-Token or from another origin" });
const workForbidden = ErrorBody.meta({ description: 'forbidden: a viewer reads the inbox but does not act in it; csrf_failed: without the X-CSRF-Token or from another origin' });
const manageForbidden = ErrorBody.meta({ description: 'forbidden: only an owner or admin manages this; csrf_failed: without the X-CSRF-Token or from another origin' });
const notFound = ErrorBody.meta({ description: 'not_found: no such conversation in this workspace' });

const InboxDetail = z
  .object({
    conversation: InboxConversation,
    messages: z.array(HistoryMessage).meta({ description: 'The transcript as the visitor saw it (the widget history\'s messages), oldest first, the latest 200' }),
    has_more: z.boolean(),
    notes: z.array(Note),
    recordings: z.array(RecordingDownload),
    reply: ReplyOptions,
  })
  .meta({ id: 'InboxConversationDetail' });

/**
 * The console's inbox (issue 31; docs/console.md "The inbox"): the workspace's conversations across channels, live
 * through a Server-Sent Events stream; a conversation's transcript, notes and recordings; a person's actions through
 * the conversation's actor; the queue's team, canned replies and settings. Every read and write is the session's
 * workspace's: another workspace's conversation is 404, as an unknown id.
 */
export const consoleInboxRoutes: FastifyPluginAsyncZod<{ services: Pick<Services, 'inbox' | 'blobs'>; hub: InboxHub | null }> = async (app, opts) => {
  const { inbox } = opts.services;
  const inboxUser = (request: { auth: Parameters<typeof userOf>[0]['auth'] }) => {
    const u = userOf(request);
    return { id: u.id, email: u.email, name: u.name, workspaceId: u.workspaceId, role: u.role };
  };

  app.get('/api/console/inbox/conversations', {
    config: { console: 'session', permission: 'readInbox' },
    schema: {
      operationId: 'consoleInboxList',
      summary: "The workspace's conversations across channels, newest activity first (the queue, status=unassigned: longest waiting first), filtered and searched",
      tags,
      querystring: InboxQuery,
      response: { 200: InboxList, ...sessionErrors, 403: readForbidden },
    },
    handler: async (request) => inbox.list(inboxUser(request), request.query),
  });

  app.get('/api/console/inbox/conversations/:id', {
    config: { console: 'session', permission: 'readInbox' },
    schema: {
      operationId: 'consoleInboxConversation',
      summary: 'One conversation: its transcript as the visitor saw it (attachments, rich replies, citations), internal notes, recordings, how to reply',
      tags,
      params: InboxConversationId,
      response: { 200: InboxDetail, ...sessionErrors, 403: readForbidden, 404: notFound },
    },
    handler: async (request) => inbox.detail(inboxUser(request), request.params.id),
  });

  app.post('/api/console/inbox/conversations/:id/actions', {
    config: { console: 'session', permission: 'workInbox' },
    schema: {
      operationId: 'consoleInboxAct',
      summary: "A person's action on the conversation, through its workflow (the update operatorAction names who acts): take, assign, reply, note, hand_back, close",
      description:
        'Every action is an update of the conversation\'s workflow (started when none runs), so its history shows who did what. Errors: 409 already_assigned (someone else holds it: of two takes at once exactly one wins), 409 conversation_closed, 409 not_handed_off (hand back of a conversation the agent answers), 422 session_window_closed (msgapp free text outside the 24-hour window: send a template), 422 template_not_approved, 503 workflow_unavailable.',
      tags,
      params: InboxConversationId,
      body: ActionBody,
      response: {
        200: ActionResult,
        400: ErrorBody.meta({ description: 'invalid_request: a field failed validation (named), or a written reply to a voice conversation' }),
        ...sessionErrors,
        403: workForbidden,
        404: ErrorBody.meta({ description: 'not_found: no such conversation (or teammate) in this workspace' }),
        409: ErrorBody.meta({ description: 'already_assigned, conversation_closed, not_handed_off' }),
        422: ErrorBody.meta({ description: 'session_window_closed, template_not_approved, agent_not_published, sender_not_authorized' }),
        502: ErrorBody.meta({ description: 'provider_error: the messaging provider refused the message' }),
        503: ErrorBody.meta({ description: 'workflow_unavailable, messaging_unavailable' }),
      },
    },
    handler: async (request) => inbox.act(inboxUser(request), request.params.id, request.body),
  });

  app.post('/api/console/inbox/conversations/:id/attachments', {
    config: { console: 'session', permission: 'workInbox' },
    schema: {
      operationId: 'consoleInboxAttach',
      summary: 'Upload a file to attach to a reply (multipart: file; web chat or msgapp): stored as the widget\'s uploads are, its type decided from the bytes; send its upload_id in the reply\'s attachments',
      tags,
      consumes: ['multipart/form-data'],
      params: InboxConversationId,
      body: z
        .object({ file: z.unknown().meta({ type: 'string', format: 'binary', minLength: 1, description: 'The file, at most 25 MB (an empty file is 400)' }) })
        .meta({ id: 'InboxAttachmentForm' })
        .optional(),
      response: {
        201: z
          .object({
            upload_id: z.string().meta({ example: 'upl_0a1b2c3d4e5f60718293a4b5', description: 'Send it in the reply\'s `attachments`' }),
            file_id: z.string().meta({ description: 'SHA-256 of the bytes' }),
            file_name: z.string(),
            file_url: z.string().meta({ description: 'Signed download link, valid 24 hours' }),
            file_key: z.string(),
            mime_type: z.string().meta({ description: 'Decided from the bytes, not from the client' }),
            status: z.literal('ready'),
          })
          .meta({ id: 'InboxAttachment' }),
        400: ErrorBody.meta({ description: 'invalid_request: no file, an empty file, or a conversation that is neither web chat nor msgapp; unsupported_type: not a supported document, spreadsheet, image, audio or video type' }),
        ...sessionErrors,
        403: workForbidden,
        404: notFound,
        409: ErrorBody.meta({ description: 'conversation_closed' }),
        413: ErrorBody.meta({ description: 'payload_too_large: over 25 MB' }),
        415: ErrorBody.meta({ description: 'unsupported_media_type: not multipart/form-data' }),
      },
    },
    // The multipart stream is read by the handler, not validated as a JSON body.
    validatorCompiler: () => (data) => ({ value: data }),
    handler: async (request, reply) => {
      // The conversation first (404, 409, 400 for another channel): no byte is read for one that cannot take it.
      const conv = await inbox.attachable(inboxUser(request), request.params.id);
      const { staged, fileName } = await readSingleFile(request, opts.services.blobs, WIDGET_UPLOAD_MAX_BYTES);
      return reply.code(201).send(await inbox.attach(conv, { staged, fileName }));
    },
  });

  app.get('/api/console/inbox/stream', {
    config: { console: 'session', permission: 'readInbox' },
    schema: {
      operationId: 'consoleInboxStream',
      summary: 'Server-Sent Events of the workspace\'s conversations: `ready`, then `conversation` {conversation_id, change: new|activity|handoff|assignment|status, waiting} per change, `ping` every heartbeat',
      description:
        "Authorized by the session cookie; ends when the session does (sign-out, expiry). While it is open, a person who works conversations counts as present: available for automatic assignment unless away; gone longer than INBOX_OFFLINE_GRACE_MS, what they hold goes back to the queue.",
      tags,
      response: { ...sessionErrors, 403: readForbidden, 503: ErrorBody.meta({ description: 'stream_unavailable: this API process has no live channel' }) },
    },
    handler: async (request, reply) => {
      if (!opts.hub?.listening) throw new ApiError(503, 'stream_unavailable', 'The inbox stream is unavailable right now; retry shortly');
      reply.hijack();
      opts.hub.open(userOf(request), reply.raw);
    },
  });

  app.get('/api/console/inbox/team', {
    config: { console: 'session', permission: 'readInbox' },
    schema: {
      operationId: 'consoleInboxTeam',
      summary: 'The people who work conversations, with presence, capacity and load; the queue\'s length; whether automatic assignment is on',
      tags,
      response: { 200: TeamList, ...sessionErrors, 403: readForbidden },
    },
    handler: async (request) => {
      const { workspaceId } = userOf(request);
      const [team, settings] = await Promise.all([inbox.team(workspaceId, opts.hub?.graceMs ?? DEFAULT_GRACE_MS), inbox.store.settings(workspaceId)]);
      return { team, queue_length: await inbox.queueLength(workspaceId), auto_assign: settings.auto_assign };
    },
  });

  app.get('/api/console/inbox/me', {
    config: { console: 'session', permission: 'readInbox' },
    schema: { operationId: 'consoleInboxPresence', summary: 'Your own presence settings: away, capacity', tags, response: { 200: Presence, ...sessionErrors, 403: readForbidden } },
    handler: async (request) => inbox.store.presence(userOf(request).id),
  });

  app.put('/api/console/inbox/me', {
    config: { console: 'session', permission: 'workInbox' },
    schema: {
      operationId: 'consoleInboxSetPresence',
      summary: 'Set yourself away (no new conversations; what you hold goes back to the queue) or back, and your capacity',
      tags,
      body: PresenceBody,
      response: { 200: Presence, ...sessionErrors, 403: workForbidden },
    },
    handler: async (request) => {
      const u = userOf(request);
      await inbox.store.setPresence(u.workspaceId, u.id, request.body);
      if (request.body.away) await inbox.rebalance([u.workspaceId], opts.hub?.graceMs ?? DEFAULT_GRACE_MS);
      return inbox.store.presence(u.id);
    },
  });

  app.put('/api/console/inbox/team/:id/capacity', {
    config: { console: 'session', permission: 'manageInbox' },
    schema: {
      operationId: 'consoleInboxSetCapacity',
      summary: "Set a teammate's capacity: the most conversations automatic assignment gives them at once",
      tags,
      params: UserIdParam,
      body: CapacityBody,
      response: { 200: Presence, ...sessionErrors, 403: manageForbidden, 404: ErrorBody.meta({ description: 'not_found: no such teammate in this workspace' }) },
    },
    handler: async (request) => {
      const { workspaceId } = userOf(request);
      await inbox.setCapacity(workspaceId, request.params.id, request.body.capacity);
      return inbox.store.presence(request.params.id);
    },
  });

  app.get('/api/console/inbox/settings', {
    config: { console: 'session', permission: 'readInbox' },
    schema: { operationId: 'consoleInboxSettings', summary: "The workspace's inbox settings", tags, response: { 200: InboxSettingsView, ...sessionErrors, 403: readForbidden } },
    handler: async (request) => inbox.store.settings(userOf(request).workspaceId),
  });

  app.put('/api/console/inbox/settings', {
    config: { console: 'session', permission: 'manageInbox' },
    schema: {
      operationId: 'consoleInboxSetSettings',
      summary: 'Turn automatic assignment on or off: round robin over available people, within each one\'s capacity',
      tags,
      body: InboxSettingsBody,
      response: { 200: InboxSettingsView, ...sessionErrors, 403: manageForbidden },
    },
    handler: async (request) => {
      const { workspaceId } = userOf(request);
      const settings = await inbox.store.setSettings(workspaceId, request.body);
      await inbox.rebalance([workspaceId], opts.hub?.graceMs ?? DEFAULT_GRACE_MS);
      return settings;
    },
  });

  app.get('/api/console/inbox/canned-replies', {
    config: { console: 'session', permission: 'readInbox' },
    schema: { operationId: 'consoleListCannedReplies', summary: "The workspace's canned replies, by title", tags, response: { 200: CannedReplyList, ...sessionErrors, 403: readForbidden } },
    handler: async (request) => ({ canned_replies: await inbox.store.cannedReplies(userOf(request).workspaceId) }),
  });

  app.post('/api/console/inbox/canned-replies', {
    config: { console: 'session', permission: 'manageInbox' },
    schema: {
      operationId: 'consoleCreateCannedReply',
      summary: 'A canned reply, with variables such as {{customer.name}} and {{agent.name}}',
      tags,
      body: CannedReplyBody,
      response: { 201: CannedReplyView, 400: ErrorBody, ...sessionErrors, 403: manageForbidden, 409: ErrorBody.meta({ description: 'canned_reply_exists: the title is taken' }) },
    },
    handler: async (request, reply) => reply.code(201).send(await inbox.store.createCanned(userOf(request).workspaceId, request.body)),
  });

  app.patch('/api/console/inbox/canned-replies/:id', {
    config: { console: 'session', permission: 'manageInbox' },
    schema: {
      operationId: 'consoleUpdateCannedReply',
      summary: 'Change a canned reply',
      tags,
      params: CannedReplyId,
      body: CannedReplyPatch,
      response: { 200: CannedReplyView, 400: ErrorBody, ...sessionErrors, 403: manageForbidden, 404: ErrorBody, 409: ErrorBody.meta({ description: 'canned_reply_exists' }) },
    },
    handler: async (request) => inbox.store.updateCanned(userOf(request).workspaceId, request.params.id, request.body),
  });

  app.delete('/api/console/inbox/canned-replies/:id', {
    config: { console: 'session', permission: 'manageInbox' },
    schema: { operationId: 'consoleDeleteCannedReply', summary: 'Delete a canned reply', tags, params: CannedReplyId, response: { 204: z.null(), ...sessionErrors, 403: manageForbidden, 404: ErrorBody } },
    handler: async (request, reply) => {
      await inbox.store.deleteCanned(userOf(request).workspaceId, request.params.id);
      return reply.code(204).send(null);
    },
  });
};
