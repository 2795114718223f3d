import { z } from 'zod';
import { idParam } from './common';

export const ConversationIdParam = idParam('conv');

const Latency = z.object({
  step: z.string(),
  ms: z.number().int().min(0),
  source: z.enum(['event', 'turn']).meta({ description: "`event`: between two events of the workflow's history; `turn`: measured inside the turn's activity" }),
});

export const DebugTurn = z
  .object({
    event_id: z.number().int().meta({ description: "The turn's ActivityTaskScheduled event in the run" }),
    message_id: z.string(),
    reply_id: z.string(),
    status: z.enum(['answered', 'held', 'failed', 'running']),
    received_at: z.string().nullable(),
    scheduled_at: z.string(),
    started_at: z.string().nullable(),
    completed_at: z.string().nullable(),
    attempt: z.number().int().nullable(),
    error: z.string().nullable(),
    model: z.string().nullable(),
    query: z.string(),
    passages: z.array(z.object({ file_id: z.string(), file_name: z.string(), title: z.string().nullable(), score: z.number(), text: z.string() })),
    prompt: z.object({ instructions: z.string(), context: z.array(z.string()), history: z.array(z.object({ role: z.string(), text: z.string() })), message: z.string() }),
    rounds: z.array(z.object({ ms: z.number().int(), tokens: z.number().int(), text: z.string() })),
    tool_calls: z.array(z.object({ round: z.number().int(), name: z.string(), arguments: z.string(), output: z.string(), ms: z.number().int() })),
    output: z.string().meta({ description: 'The reply as stored and sent' }),
    output_unmasked: z.string().nullable().meta({ description: "The model's answer before masking: owners and admins only (each view audited), null for other roles" }),
    latency: z.array(Latency),
    traced: z.boolean().meta({ description: "Whether the history holds the turn's trace (turns recorded before the debugger hold only the reply)" }),
  })
  .meta({ id: 'DebugTurn' });

export const ConversationTurns = z
  .object({
    conversation_id: z.string(),
    workflow: z
      .object({
        id: z.string(),
        run_id: z.string(),
        status: z.string(),
        started_at: z.string(),
        ui_url: z.string().nullable().meta({ description: 'The run in the Temporal UI (TEMPORAL_UI_ORIGIN), null when none is configured' }),
      })
      .nullable()
      .meta({ description: 'The latest run of the conversation actor; null before its first message' }),
    unmasked: z.boolean(),
    turns: z.array(DebugTurn),
  })
  .meta({ id: 'ConversationTurns' });

export const ExportedHistory = z
  .looseObject({ events: z.array(z.unknown()) })
  .meta({ id: 'ExportedHistory', description: 'The run\'s history as `temporal workflow show --output json` writes it, payloads as stored (encrypted): `npm run replay` reads it with the deployment\'s key' });
