import type { TurnContext } from '../turn/context';
import type { TurnTool } from './types';

/** The timeline event of a handoff a test conversation did not make. */
export const HANDOFF_STUBBED_EVENT = 'handoff.stubbed';

/** The model hands the conversation to a person. */
export const handoff: TurnTool = {
  name: 'handoff',
  definition: (ctx) =>
    ctx.spec.actions.some((a) => a.type === 'handoff')
      ? {
          name: 'handoff',
          description: 'Hand the conversation to a human colleague when you cannot help or the customer asks for a person.',
          parameters: { type: 'object', properties: { reason: { type: 'string' } }, required: ['reason'] },
        }
      : null,
  async run(ctx, args) {
    await handOff(ctx, String(args.reason ?? 'handoff requested').slice(0, 500));
    return JSON.stringify({ ok: true, note: 'A human colleague will follow up. Tell the customer so, briefly.' });
  },
};

/**
 * Hands the conversation to a person (a case, on its timeline) and tells its widgets, which show who answers now.
 * Told on every channel: a conversation without sockets has no listener (the notice costs nothing).
 */
export async function handOff(ctx: TurnContext, reason: string): Promise<void> {
  const { deps, input } = ctx;
  // A console test conversation ("Try it") asks no person: the handoff is recorded for the panel, and nothing is flagged or told.
  if (ctx.test) return deps.repos.conversations.addConversationEvent(deps.em.fork(), input.conversationId, HANDOFF_STUBBED_EVENT, { reason, reply_id: input.replyId });
  await deps.repos.conversations.flagForHuman(deps.em.fork(), input.conversationId, reason, { reason, message_id: input.messageId });
  await deps.publisher.handoff(input.conversationId);
}
