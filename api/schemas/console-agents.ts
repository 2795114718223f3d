import { z } from 'zod';
import { notBlank } from '../../lib/text';
import { idString } from './common';

/** A message to the agent in a test conversation; without conversation_id a new test conversation starts. */
export const TryAgentBody = z
  .object({
    text: notBlank(z.string().min(1).max(4000)).meta({ description: 'What the visitor says, 1 to 4,000 characters' }),
    conversation_id: idString('conv').optional().meta({ description: 'A test conversation this agent started here before (the answer of an earlier try); omit to start one' }),
  })
  .strict();

const TryAction = z.object({
  kind: z.enum(['mcp_tool', 'sender', 'handoff']),
  name: z.string().meta({ description: 'The MCP tool, send_reply for the send a messaging number would make, or handoff (no person is asked)' }),
  server_id: z.string().nullable(),
  arguments: z.record(z.string(), z.unknown()),
  stubbed: z.boolean().meta({ description: 'Not made: it acts outside (an MCP tool not marked read-only, a send, a handoff); recorded only' }),
  ok: z.boolean(),
  output: z.string(),
});

export const TryAgentResult = z
  .object({
    conversation_id: z.string().meta({ description: 'The test conversation: in no list, analytics or billing' }),
    message_id: z.string(),
    reply: z
      .object({
        id: z.string(),
        text: z.string(),
        extras: z.record(z.string(), z.unknown()).meta({ description: 'Citations, suggested replies, cards, charts, as the widget gets them' }),
        handoff: z.boolean(),
        held: z.boolean().meta({ description: 'Not answered: the conversation was handed to a person' }),
      })
      .nullable(),
    error: z.string().nullable().meta({ description: 'Why the turn gave no reply' }),
    actions: z.array(TryAction).meta({ description: 'What the turn called or would have sent, in order' }),
  })
  .meta({ id: 'ConsoleTryAgentResult' });
