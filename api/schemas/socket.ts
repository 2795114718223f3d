import { z } from 'zod';
import { RichBlocks } from '../../domain/chat/rich';
import { Card, Chart, Citation } from '../../domain/chat/elements';

/**
 * The frames of the reply socket (`GET /api/chat/connect`), as JSON text messages: the
 * OpenAPI document has no socket operation type, so they are a component referenced by
 * the upgrade's 101 response (docs/decisions.md "Everywhere": the reply socket is described for generators).
 * Mirrors `ChatFrame` in domain/chat/frames.ts.
 */
const ReplyId = z.string().meta({ description: 'Equals the `reply_id` of the 202 that accepted the message' });
export const ChatFrameSchema = z
  .discriminatedUnion('type', [
    z.object({
      type: z.literal('reply_delta'),
      reply_id: ReplyId,
      text: z.string().meta({ description: 'Next chunk of streamed text' }),
      reset: z
        .literal(true)
        .optional()
        .meta({ description: 'The turn runs again after its stream was cut off: the live bubble starts over with this text instead of appending it' }),
    }),
    z
      .object({
        type: z.literal('visitor_message'),
        message_id: z.string(),
        client_message_id: z.string(),
        reply_id: ReplyId.meta({ description: 'The reply that will answer this message (its frames follow)' }),
        text: z.string(),
        timestamp: z.string(),
        attachments: z.array(z.unknown()).optional(),
      })
      .meta({ description: "The visitor's own message, sent from another tab or device of the conversation: shown as the visitor's, never as a reply" }),
    z.object({
      type: z.literal('reply'),
      reply_id: ReplyId,
      text: z.string().meta({ description: 'The finished turn; authoritative (replaces the deltas)' }),
      attachments: z.array(z.unknown()).optional(),
      charts: z.array(Chart).optional(),
      cards: z.array(Card).optional(),
      rich: RichBlocks.optional(),
      suggested_actions: z.array(z.string()).optional(),
      citations: z.array(Citation).optional(),
      author: z.literal('human').optional().meta({ description: 'Written by a human agent (a team member), not the AI agent' }),
      author_name: z.string().optional().meta({ description: "A human agent's name, when the message was written with one" }),
      author_avatar_url: z.string().optional().meta({ description: "https URL of a human agent's picture, when given" }),
      unsolicited: z.literal(true).optional().meta({ description: 'Started by the platform, with no pending request' }),
    }),
    z
      .object({
        type: z.literal('handoff'),
        active: z.boolean().meta({ description: 'true: a person holds the conversation and the agent does not answer; false: the agent answers again' }),
        reply_id: ReplyId.optional().meta({ description: 'The turn of this message ended without an answer because a person holds the conversation: stop waiting for it' }),
      })
      .meta({ description: 'Who answers the conversation changed (a person took it over or handed it back), or a message will be answered by a person' }),
    z.object({ type: z.literal('suggested_actions'), reply_id: ReplyId, suggested_actions: z.array(z.string()) }),
    z.object({ type: z.literal('error'), reply_id: ReplyId, code: z.enum(['workflow_provisioning', 'workflow_execution_failed']), text: z.string() }),
    z.object({ type: z.literal('task_status'), task_key: z.string(), label: z.string(), status: z.enum(['running', 'completed', 'cancelled', 'failed']) }),
    z.object({ type: z.literal('ui:command'), command: z.string(), args: z.record(z.string(), z.unknown()) }),
    z.object({ type: z.literal('ping') }).meta({ description: 'Keep-alive every 30 s; reconnect after about 75 s of silence' }),
  ])
  .meta({ description: 'A frame pushed on the reply socket (JSON text message). The socket is receive-only.' });

export const SOCKET_UPGRADE_DESCRIPTION = `Switching Protocols: the WebSocket is open, bound to the one conversation of the query,
receive-only (client frames are ignored; over 4 KB closes with 1009). Frames are JSON text messages (ChatFrame).
With \`after\`, the replies stored since that message are sent first. Closes with 1008 when authorization is lost
(site suspended, origin removed, conversation closed) and with 1012 when the server must be reconnected to.`;
