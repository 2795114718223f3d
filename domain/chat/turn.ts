import { emptyElements } from './elements';
import type { ChatMessageRow } from './transcript';
import { DEFAULT_TOP_K, type TurnContext, type TurnDeps, type TurnInput, type TurnReply } from './turn/context';
import { answerFromPassages, answerWithModel } from './turn/generate';
import { agentOf, gather } from './turn/gather';
import { chooseModel } from './turn/model-choice';
import { storeReply } from './turn/store';
import { TraceRecorder } from './turn/trace';

export type { Passage, TurnDeps, TurnInput, TurnReply, TurnToolCall } from './turn/context';
export { ChatFramePublisher, type TurnPublisher } from './turn/publisher';
export { describeAttachment } from './turn/prompt';
export { untrustedToolOutput } from './tools/mcp';

/**
 * One agent turn: the reply to one visitor message. The reply's id is decided before
 * the turn runs and the reply row is written once (insert-if-absent), so a turn retried
 * after a crash either finds its reply already stored (and only re-announces it) or
 * produces it; the visitor never gets two answers to one message.
 *
 * A turn reads as gather → generate → store → publish. With a language model: the agent's
 * instructions, recent history, the passages retrieved from the agent's knowledge-base
 * selection (labelled with their file names) and the tools of the registry (tools/).
 * Without one: `answerWithoutModel` — the best relevant passage in whole sentences under its
 * article's title, never invented text.
 */
export class AgentTurns {
  constructor(private readonly deps: TurnDeps) {}

  async run(input: TurnInput, onProgress?: () => void): Promise<TurnReply> {
    const start = await this.begin(input, onProgress);
    if ('done' in start) return start.done;
    const { ctx } = start;
    const trace = ctx.trace!;
    const gathered = await trace.step('gather', () => gather(ctx));
    const history = gathered.history.filter((m) => m.role !== 'tool' && m.id !== ctx.visitor.id);
    trace.gathered(ctx.model?.name ?? null, gathered.query, gathered.passages, ctx.spec.instructions, history, ctx.visitor.text, gathered.attachments.map((a) => a.file_name));
    const answer = await trace.step('generate', () => (ctx.model ? answerWithModel(ctx, ctx.model, gathered) : answerFromPassages(ctx, gathered)));
    const row = await trace.step('store', () => storeReply(ctx, answer));
    await trace.step('publish', () => this.publish(ctx, row));
    return { ...toReply(row, answer.handoff), ...(ctx.toolCalls.length ? { tool_calls: ctx.toolCalls } : {}), trace: trace.output(answer.text) };
  }

  /**
   * The turn's context, or its end already: a reply stored before (announced again, never answered twice),
   * or a conversation a person holds (the agent stays silent until the case is resolved).
   */
  private async begin(input: TurnInput, onProgress?: () => void): Promise<{ ctx: TurnContext } | { done: TurnReply }> {
    const { deps } = this;
    // Independent reads, at once: the time before the model's request is the visitor's wait.
    const [stored, { agent, channel, commands, test }, visitor, held] = await Promise.all([
      deps.transcript.get(input.replyId),
      agentOf(deps, input),
      deps.transcript.get(input.messageId),
      deps.repos.conversations.conversationNeedsHuman(deps.em.fork(), input.conversationId),
    ]);
    // Web chat has sockets to tell; on a messaging channel the reply leaves as a message (the actor sends it).
    const sockets = channel === 'web';
    if (stored) {
      // Stored before a crash or a lost acknowledgement.
      if (sockets) await deps.publisher.reply(input.conversationId, stored);
      return { done: toReply(stored, false) };
    }
    if (held) {
      // The widget stops waiting for this reply (no typing dots for the agent while a person has the conversation).
      if (sockets) await deps.publisher.handoff(input.conversationId, input.replyId);
      return { done: { reply_id: input.replyId, text: '', attachments: [], extras: {}, handoff: false, held: true } };
    }
    if (!agent) throw new Error(`conversation ${input.conversationId} has no agent`);
    const spec = agent.spec;
    if (!visitor) throw new Error(`visitor message ${input.messageId} is not stored`);
    const model = await chooseModel(deps, input.workspaceId, agent.id, spec);
    const kbAction = spec.actions.find((a) => a.type === 'kb_search');
    const elementsAction = spec.actions.find((a) => a.type === 'reply_elements');
    const ctx: TurnContext = {
      deps,
      input,
      agentId: agent.id,
      spec,
      channel,
      sockets,
      // A phone call's conversation (voice) streams too: its voice turn speaks the first clause while the model writes the rest (domain/voice/reply-deltas.ts).
      stream: channel === 'voice' || (sockets && (spec.triggers.web_chat?.response_delivery ?? 'stream') === 'stream'),
      commands,
      visitor,
      model,
      topK: kbAction && kbAction.type === 'kb_search' ? kbAction.top_k : DEFAULT_TOP_K,
      // Cards, charts and chips need the widget: a messaging channel's reply is text.
      kinds: elementsAction && elementsAction.type === 'reply_elements' && channel === 'web' ? elementsAction.kinds : [],
      shown: [],
      elements: emptyElements(),
      mcp: { resultsFrom: new Set(), answered: [] },
      toolCalls: [],
      test,
      onProgress,
      trace: new TraceRecorder(),
    };
    return { ctx };
  }

  /** The stored reply to the conversation's sockets (web chat), then its follow-up chips as their own frame. */
  private async publish(ctx: TurnContext, row: ChatMessageRow): Promise<void> {
    if (!ctx.sockets) return;
    const { publisher } = this.deps;
    await publisher.reply(ctx.input.conversationId, row);
    const chips = row.extras?.suggested_actions ?? [];
    if (chips.length) await publisher.suggestedActions(ctx.input.conversationId, row.id, chips);
  }
}

function toReply(row: ChatMessageRow, handoff: boolean): TurnReply {
  return { reply_id: row.id, text: row.text, attachments: row.attachments ?? [], extras: row.extras ?? {}, handoff };
}
