import { z } from 'zod';
import { Cursor, TimestampBound } from './common';

const E164 = z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 number such as +15551234567');
const Timestamp = z.string().meta({ format: 'date-time' });

export const SendMessageBody = z
  .object({
    // A string, not a literal: SendPlanner.planSend refuses any other value with the contract's pointer to POST /api/v1/outbound.
    channel: z.string().optional().meta({ enum: ['msgapp'], description: "Optional; if present it must be 'msgapp' (other channels use POST /api/v1/outbound)" }),
    from: E164.optional().meta({ description: 'The number the message goes out on; the published agent that owns it sends it' }),
    agent_id: z.string().min(1).max(100).optional().meta({ description: 'Alternative to from; sending both is refused' }),
    to: E164,
    customer_id: z.string().min(1).max(100).optional(),
    text: z.string().min(1).max(4096).optional(),
    media: z
      .object({
        type: z.enum(['image', 'audio', 'video', 'document']),
        url: z.url({ protocol: /^https?$/ }).max(2048),
        caption: z.string().max(1024).optional().meta({ description: 'Not on audio' }),
        filename: z.string().min(1).max(240).optional().meta({ description: 'Documents only: the name the recipient sees' }),
      })
      .strict()
      .optional(),
    location: z
      .object({ latitude: z.number().min(-90).max(90), longitude: z.number().min(-180).max(180), name: z.string().max(1000).optional(), address: z.string().max(1000).optional() })
      .strict()
      .optional(),
    template: z
      .object({ name: z.string().min(1).max(512), language: z.string().min(2).max(10).optional(), variables: z.array(z.string().max(1024)).max(20).optional() })
      .strict()
      .optional()
      .meta({ description: "A template registered and approved on the sending agent's number" }),
  })
  .strict()
  // The send rules SendPlanner.planSend enforces (domain/messaging/plan.ts), as the document states them: exactly one content kind
  // (rule 1), `from` or `agent_id` but not both, no caption on audio and a filename only on a document (rule 5).
  .meta({
    allOf: [
      { oneOf: [{ required: ['text'] }, { required: ['media'] }, { required: ['location'] }, { required: ['template'] }] },
      { oneOf: [{ required: ['from'] }, { required: ['agent_id'] }] },
      {
        properties: {
          media: {
            allOf: [
              { if: { properties: { type: { const: 'audio' } } }, then: { not: { required: ['caption'] } } },
              { if: { properties: { type: { not: { const: 'document' } } } }, then: { not: { required: ['filename'] } } },
            ],
          },
        },
      },
    ],
  });

export const SendResult = z
  .object({
    id: z.string(),
    conversation_id: z.string().nullable(),
    agent_id: z.string(),
    channel: z.literal('msgapp'),
    to: z.string(),
    from: z.string(),
    send_authorized: z.boolean(),
    status: z.literal('sent'),
    provider_message_id: z.string(),
  })
  .meta({ id: 'MessageSendResult' });

export const Message = z
  .object({
    id: z.string(),
    conversation_id: z.string().nullable(),
    customer_id: z.string().nullable(),
    agent_id: z.string().nullable(),
    channel: z.literal('msgapp'),
    from: z.string(),
    to: z.string(),
    kind: z.enum(['text', 'template', 'image', 'audio', 'video', 'document', 'location']),
    text: z.string().nullable(),
    template_name: z.string().optional(),
    status: z.enum(['sent', 'delivered', 'read', 'failed']),
    status_history: z.array(z.object({ status: z.string(), at: z.string(), error: z.string().optional() })),
    error: z.string().nullable(),
    provider_message_id: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({
    id: 'Message',
    description:
      'An outbound message as read back. A message becomes readable once the provider answered the send (so `status` is always sent, delivered, read or failed); inbound messages are not readable here (they arrive as `message.inbound` and in their conversation\'s events).',
  });

export const MessageList = z.object({ messages: z.array(Message), next_cursor: z.string().nullable() }).meta({ id: 'MessageList' });
export const ListMessagesQuery = z.object({
  to: z.string().max(32).optional(),
  from: z.string().max(32).optional(),
  status: z.enum(['sent', 'delivered', 'read', 'failed']).optional(),
  since: TimestampBound.optional().meta({ description: 'Inclusive' }),
  until: TimestampBound.optional().meta({ description: 'Exclusive' }),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: Cursor.optional(),
});
