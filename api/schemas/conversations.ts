import { z } from 'zod';
import { Cursor as PageCursor } from './common';

const Timestamp = z.string().meta({ format: 'date-time' });
const Cursor = PageCursor.optional();
const Limit = z.coerce.number().int().min(1).max(200).default(50);

export const Conversation = z
  .object({
    id: z.string(),
    customer_id: z.string().nullable(),
    agent_id: z.string().nullable(),
    channel: z.enum(['msgapp', 'web', 'voice']),
    status: z.enum(['open', 'closed']),
    needs_human: z.boolean().meta({ description: 'Flagged for a human to follow up (a case)' }),
    case_reason: z.string().nullable(),
    last_inbound_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Conversation' });

export const UpdateConversationBody = z
  .object({
    needs_human: z.boolean().meta({
      description: 'true: a human takes the conversation (a case; the agent stops answering it). false: the case is resolved and the agent answers the next message.',
    }),
    case_reason: z.string().trim().min(1).max(500).optional().meta({ description: 'Why a human is needed (with needs_human: true); default "flagged by an operator"' }),
  })
  .strict()
  .refine((b) => b.needs_human || b.case_reason === undefined, { path: ['case_reason'], message: 'only with needs_human: true' })
  .meta({ id: 'UpdateConversation' });

export const OutboundBody = z
  .object({
    channel: z.enum(['web', 'msgapp', 'voice']).meta({
      description: 'web: a human agent writes into a web-chat conversation. msgapp messages are sent with POST /api/v1/messages; voice (dial-out) is not built yet.',
    }),
    conversation_id: z.string().min(1).max(100),
    text: z.string().trim().min(1).max(4096),
  })
  .strict()
  .meta({ id: 'OutboundRequest' });

export const OutboundMessage = z
  .object({
    id: z.string(),
    channel: z.literal('web'),
    conversation_id: z.string(),
    text: z.string(),
    author: z.literal('human'),
    created_at: Timestamp,
  })
  .meta({ id: 'OutboundMessage' });

export const ConversationList = z.object({ conversations: z.array(Conversation), next_cursor: z.string().nullable() }).meta({ id: 'ConversationList' });
export const CaseList = z.object({ cases: z.array(Conversation), next_cursor: z.string().nullable() }).meta({ id: 'CaseList' });
export const ListConversationsQuery = z.object({
  customer_id: z.string().min(1).max(100).optional(),
  status: z.enum(['open', 'closed']).optional(),
  limit: Limit,
  cursor: Cursor,
});
export const PageQuery = z.object({ limit: Limit, cursor: Cursor });

export const ConversationEvents = z
  .object({
    events: z.array(z.object({ id: z.string(), type: z.string(), data: z.record(z.string(), z.unknown()), created_at: Timestamp })),
    next_cursor: z.string().nullable(),
  })
  .meta({ id: 'ConversationEvents', description: 'The timeline, oldest first: messages and their status changes' });

export const CallList = z.object({ calls: z.array(z.unknown()), next_cursor: z.null() }).meta({ id: 'CallList', description: 'Voice is not built yet: always empty' });
export const RecordingList = z.object({ recordings: z.array(z.unknown()) }).meta({ id: 'RecordingList', description: 'Voice is not built yet: always empty' });
