import { z } from 'zod';
import { INBOX_STATUSES } from '../../domain/conversations/inbox';
import { idParam, idString } from './common';

const Timestamp = z.string().meta({ format: 'date-time' });
const Channel = z.enum(['web', 'msgapp', 'voice']);

export const InboxQuery = z.object({
  status: z
    .enum(INBOX_STATUSES)
    .default('open')
    .meta({
      description:
        'open (default); needs_human: open and waiting for or held by a person; mine: open and held by you; unassigned: the queue (waiting for a person, nobody holds it), longest waiting first; closed; all',
    }),
  channel: Channel.optional(),
  agent_id: idString('agt').optional(),
  site_id: idString('site').optional(),
  q: z.string().trim().min(1).max(200).optional().meta({ description: "Words searched in the transcripts (full text, every word as written); at most 2,000 matching lines are looked through" }),
  limit: z.coerce.number().int().min(1).max(100).default(30),
  cursor: z.string().max(200).optional().meta({ description: 'next_cursor of the previous page' }),
});

const Person = z.object({ id: z.string(), email: z.string(), name: z.string().nullable() });

export const InboxConversation = z
  .object({
    id: z.string(),
    workspace_id: z.string(),
    channel: Channel,
    status: z.enum(['open', 'closed']),
    needs_human: z.boolean().meta({ description: 'A person has it or is asked for: the agent does not answer' }),
    case_reason: z.string().nullable(),
    title: z.string().nullable(),
    agent: z.object({ id: z.string(), name: z.string() }).nullable(),
    site_id: z.string().nullable(),
    customer: z.object({ id: z.string(), name: z.string().nullable(), email: z.string().nullable(), phone: z.string().nullable() }).nullable(),
    assignee: Person.nullable().meta({ description: 'Who holds it (one person at most)' }),
    queued_at: Timestamp.nullable().meta({ description: 'Since when it waits for a person (the queue orders by it)' }),
    assigned_at: Timestamp.nullable(),
    close_reason: z.string().nullable(),
    last_message: z.string().nullable(),
    last_inbound_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp.meta({ description: 'Newest activity (the list orders by it)' }),
  })
  .meta({ id: 'InboxConversation' });

export const InboxList = z.object({ conversations: z.array(InboxConversation), next_cursor: z.string().nullable() }).meta({ id: 'InboxList' });

export const Note = z
  .object({ id: z.string(), conversation_id: z.string(), author: z.object({ id: z.string().nullable(), email: z.string() }), text: z.string(), created_at: Timestamp })
  .meta({ id: 'InboxNote', description: "An internal note: the team's only, never in the widget's history or a webhook" });

export const ReplyOptions = z
  .object({
    channel: Channel,
    can_reply: z.boolean(),
    window_open: z.boolean().meta({ description: "msgapp: the customer wrote within 24 hours, so free text is delivered; else only an approved template" }),
    window_closes_at: Timestamp.nullable(),
    templates: z.array(z.object({ name: z.string(), language: z.string(), body: z.string() })).meta({ description: "msgapp: the agent's approved templates" }),
  })
  .meta({ id: 'InboxReplyOptions' });

export const InboxConversationId = idParam('conv');

export const ActionBody = z
  .discriminatedUnion('kind', [
    z.object({ kind: z.literal('take') }).strict(),
    z.object({ kind: z.literal('assign'), assignee_id: idString('usr') }).strict(),
    z
      .object({
        kind: z.literal('reply'),
        text: z.string().trim().min(1).max(4096).optional(),
        template: z.object({ name: z.string().min(1).max(512), language: z.string().min(2).max(10).optional(), variables: z.array(z.string().max(1024)).max(20).optional() }).strict().optional(),
        attachments: z
          .array(idString())
          .max(3)
          .optional()
          .meta({
            description:
              "Web chat: up to 3 files, each one of the workspace's active knowledge-base files (file_…) or a file uploaded to this conversation with POST …/attachments (upl_…), shown under the reply with a signed link (as the agent attaches them). msgapp: one such file, inside the 24-hour window, sent as a media message (a signed link the provider fetches) with the text as its caption (an audio file takes no caption: 400); a template carries none (400)",
          }),
      })
      .strict()
      .refine((b) => (b.text === undefined) !== (b.template === undefined), { path: ['text'], message: 'text or template: exactly one is required' }),
    z.object({ kind: z.literal('note'), text: z.string().trim().min(1).max(5000) }).strict(),
    z.object({ kind: z.literal('hand_back') }).strict(),
    z.object({ kind: z.literal('close'), reason: z.string().trim().min(1).max(500) }).strict(),
  ])
  .meta({
    id: 'InboxAction',
    description:
      "take: hold it (the agent stops answering; the visitor is told a person joined); assign: give it to a teammate (from the queue or from yourself); reply: to the customer on the conversation's channel (web chat: the widget, author human; msgapp: free text inside the 24-hour window, else a template); note: internal; hand_back: the agent answers the next message; close: with a reason",
  });

export const ActionResult = z
  .object({ ok: z.literal(true), message_id: z.string().optional(), note_id: z.string().optional() })
  .meta({ id: 'InboxActionResult' });

export const CannedReplyView = z
  .object({ id: z.string(), title: z.string(), text: z.string().meta({ description: 'With variables such as {{customer.name}} and {{agent.name}}, filled in by the console when used' }), created_at: Timestamp, updated_at: Timestamp })
  .meta({ id: 'CannedReply' });
export const CannedReplyList = z.object({ canned_replies: z.array(CannedReplyView) }).meta({ id: 'CannedReplyList' });
export const CannedReplyBody = z.object({ title: z.string().trim().min(1).max(100), text: z.string().trim().min(1).max(4000) }).strict();
export const CannedReplyPatch = CannedReplyBody.partial().strict();
export const CannedReplyId = idParam('cnr');

export const Teammate = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    role: z.string(),
    online: z.boolean().meta({ description: 'The inbox is open (its live stream heard from within the grace period)' }),
    away: z.boolean(),
    available: z.boolean().meta({ description: 'Online and not away: automatic assignment may give them conversations' }),
    capacity: z.number().int().meta({ description: 'Most conversations automatic assignment gives them at once' }),
    holding: z.number().int(),
  })
  .meta({ id: 'InboxTeammate' });
export const TeamList = z.object({ team: z.array(Teammate), queue_length: z.number().int(), auto_assign: z.boolean() }).meta({ id: 'InboxTeam' });
export const PresenceBody = z.object({ away: z.boolean().optional(), capacity: z.number().int().min(0).max(100).optional() }).strict();
export const Presence = z.object({ away: z.boolean(), capacity: z.number().int() }).meta({ id: 'InboxPresence' });
export const CapacityBody = z.object({ capacity: z.number().int().min(0).max(100) }).strict();
export const UserIdParam = idParam('usr');
export const InboxSettingsBody = z.object({ auto_assign: z.boolean() }).strict();
export const InboxSettingsView = z.object({ auto_assign: z.boolean() }).meta({ id: 'InboxSettings' });
