import { z } from 'zod';
import { Cursor as PageCursor } from './common';
import { nonBlankText } from '../../lib/text';

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
    case_reason: nonBlankText(500).optional().meta({ description: 'Why a human is needed (with needs_human: true); default "flagged by an operator"' }),
  })
  .strict()
  .refine((b) => b.needs_human || b.case_reason === undefined, { path: ['case_reason'], message: 'only with needs_human: true' })
  .meta({ id: 'UpdateConversation', dependentSchemas: { case_reason: { properties: { needs_human: { const: true } } } } });

const TextOutbound = {
  conversation_id: z.string().min(1).max(100),
  text: nonBlankText(4096),
};

/**
 * `channel` is web or voice: msgapp is not sent here (the document lists only what is), and
 * the refusal says where it goes instead.
 */
export const OutboundBody = z
  .discriminatedUnion(
    'channel',
    [
    z
      .object({
        channel: z.literal('web').meta({ description: 'A human agent writes into a web-chat conversation' }),
        ...TextOutbound,
        author_name: nonBlankText(80).optional().meta({ description: "The person's name, shown above the message in the widget (default: \"Support team\")" }),
        author_avatar_url: z
          .url({ protocol: /^https$/ })
          .max(2000)
          .optional()
          .meta({ description: "https URL of the person's picture, shown beside the name (loaded by the visitor's browser, never fetched by the server)" }),
      })
      .strict()
      .meta({ id: 'OutboundWeb' }),
    z
      .object({
        channel: z.literal('voice').meta({ description: 'Dial-out: the agent phones `to`' }),
        to: z.string().min(1).max(40).meta({ description: 'The number to call, international format (E.164, e.g. +14155550123)' }),
        agent_id: z.string().min(1).max(100).meta({ description: "The workspace's published agent that talks (its web_chat.dial_out must be on)" }),
        conversation_id: z.string().min(1).max(100).optional().meta({ description: 'The conversation the call belongs to; absent: a new voice conversation with the customer holding that number' }),
      })
      .strict()
      .meta({ id: 'OutboundVoice' }),
    ],
    { error: (iss) => (iss.code === 'invalid_union' && (iss.input as { channel?: unknown } | undefined)?.channel === 'msgapp' ? 'msgapp messages are sent with POST /api/v1/messages' : undefined) },
  )
  .meta({ id: 'OutboundRequest' });

export const OutboundMessage = z
  .object({
    id: z.string(),
    channel: z.literal('web'),
    conversation_id: z.string(),
    text: z.string(),
    author: z.literal('human'),
    author_name: z.string().nullable(),
    author_avatar_url: z.string().nullable(),
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

const CallStatus = z.enum(['calling', 'ringing', 'in_progress', 'completed', 'failed', 'no_answer', 'busy']);

export const RecordingDownload = z
  .object({
    id: z.string(),
    kind: z.enum(['caller', 'agent', 'combined']).meta({ description: "caller: the other side's audio; agent: what the agent said; combined: both, stereo (caller left, agent right)" }),
    mime_type: z.string().meta({ description: 'audio/ogg (Opus) or audio/wav' }),
    channels: z.number().int(),
    duration_ms: z.number().int(),
    bytes: z.number().int(),
    voice_session_id: z.string().nullable(),
    call_id: z.string().nullable(),
    created_at: Timestamp,
    url: z.string().meta({ description: 'A signed download link, valid 24 hours; served as an attachment' }),
  })
  .meta({ id: 'RecordingDownload' });

export const Call = z
  .object({
    id: z.string(),
    conversation_id: z.string(),
    agent_id: z.string(),
    phone: z.string().meta({ description: 'The number called, E.164' }),
    direction: z.literal('outbound'),
    status: CallStatus.meta({ description: 'calling → ringing → in_progress → completed; or failed, no_answer, busy' }),
    status_history: z.array(z.object({ status: CallStatus, at: Timestamp })),
    duration_ms: z.number().int().nullable().meta({ description: 'Talk time, from the answer to the hang-up (0 when never answered); null while the call runs' }),
    answered_at: Timestamp.nullable(),
    ended_at: Timestamp.nullable(),
    created_at: Timestamp,
    error: z.string().nullable().meta({ description: 'Why the call failed or was not answered, when it says' }),
    answered_by: z
      .enum(['human', 'machine', 'unknown'])
      .nullable()
      .meta({ description: "Who answered, by answering-machine detection when the agent's phone.answering_machine is not off (unknown: no telling, treated as a person); null: not screened" }),
    recordings: z.array(RecordingDownload).meta({ description: 'Saved once the call ends: caller, agent and combined' }),
  })
  .meta({ id: 'Call' });

export const CallList = z.object({ calls: z.array(Call), next_cursor: z.string().nullable() }).meta({ id: 'CallList', description: 'Calls, newest first' });
export const RecordingList = z.object({ recordings: z.array(RecordingDownload) }).meta({ id: 'RecordingList', description: "The conversation's recordings (voice sessions and calls), oldest first" });
