import type { ToolCall, ChatTurnMessage } from '../../ports/llm';
import { answerWithoutModel } from '../answer-without-model';
import { MarkerStream, stripMarkers, usedFiles } from '../citations';
import { TurnTools } from '../tools';
import { handOff } from '../tools/handoff';
import { endMcpRound } from '../tools/mcp';
import { MAX_TOOL_ROUNDS, type Passage, type TurnContext, type TurnModelChoice } from './context';
import type { Gathered } from './gather';
import { modelMessages } from './prompt';

/** The answer before it is stored: its text (markers removed), what it cited, what it cost. The elements are in the context. */
export interface Answer {
  text: string;
  handoff: boolean;
  /** Prompt and completion tokens of every round. */
  tokens: number;
  /** The passages the answer used: its citations. */
  cited: Passage[];
  suggested: string[];
}

/**
 * With a language model: rounds of completion and tool calls, at most MAX_TOOL_ROUNDS before
 * the model must answer. A model may answer and call a tool (chips, a card, a hand-off) in the
 * same round, then say more or nothing after the results: the reply is the text of every
 * round, a paragraph apart.
 */
export async function answerWithModel(ctx: TurnContext, chosen: TurnModelChoice, gathered: Gathered): Promise<Answer> {
  const tools = await TurnTools.forTurn(ctx);
  const offered = tools.definitions();
  const messages = modelMessages(ctx, gathered, { externalTools: tools.external });
  const streamer = ctx.stream ? new RoundStream(ctx) : null;
  let handoff = false;
  let tokens = 0;
  const said: string[] = [];
  // The passage numbers the answer's markers named, in order.
  const used: number[] = [];
  for (let round = 0; ; round++) {
    streamer?.startRound(said.length > 0);
    ctx.trace?.roundStart();
    const last = round >= MAX_TOOL_ROUNDS;
    const result = await chosen.model.complete(
      { messages, tools: last || !offered.length ? undefined : offered, model: chosen.name, temperature: ctx.spec.model.temperature, max_tokens: chosen.max_tokens },
      streamer?.onDelta,
    );
    const roundTokens = (result.usage?.prompt_tokens ?? 0) + (result.usage?.completion_tokens ?? 0);
    tokens += roundTokens;
    ctx.trace?.roundDone(result.text, roundTokens);
    await streamer?.endRound();
    // The visitor never sees a marker: stripped from each round's text, the passages they name kept.
    const clean = stripMarkers(result.text, ctx.shown.length);
    for (const n of clean.used) if (!used.includes(n)) used.push(n);
    if (clean.text.trim()) said.push(clean.text.trim());
    if (!result.tool_calls.length || last) {
      const text = said.join('\n\n');
      const handoffAction = ctx.spec.actions.find((a) => a.type === 'handoff');
      const fallback = handoff ? ((handoffAction as { message?: string } | undefined)?.message ?? '') : '';
      return { text: text || fallback, handoff, tokens, cited: usedFiles(text, used, ctx.shown), suggested: ctx.elements.suggested_actions };
    }
    messages.push({ role: 'assistant', content: result.text || null, tool_calls: result.tool_calls });
    if (await runRound(ctx, tools, result.tool_calls, round, messages)) handoff = true;
  }
}

/**
 * One round's tool calls, in order: each result to the model and to the transcript (a `tool` row).
 * True when the model called `handoff`.
 */
async function runRound(ctx: TurnContext, tools: TurnTools, calls: ToolCall[], round: number, messages: ChatTurnMessage[]): Promise<boolean> {
  const { input } = ctx;
  let handoff = false;
  for (const [i, call] of calls.entries()) {
    const at = Date.now();
    const output = await tools.run(call);
    ctx.trace?.toolCall(call.name, call.arguments, output, Date.now() - at);
    // Asked for a person: a reply with no text of its own says the handoff action's message.
    if (call.name === 'handoff') handoff = true;
    messages.push({ role: 'tool', tool_call_id: call.id, content: output });
    await ctx.deps.transcript.append({
      id: `${input.replyId}_tool${round}_${i}`,
      workspaceId: input.workspaceId,
      conversationId: input.conversationId,
      role: 'tool',
      text: JSON.stringify({ tool: call.name, arguments: call.arguments, output: output.slice(0, 4000) }),
    });
  }
  // Calls of one round were written before any of the round's results were read: they are judged on earlier rounds' results.
  endMcpRound(ctx);
  return handoff;
}

/**
 * Without a model: `answerWithoutModel` — the best relevant passage in whole sentences under
 * its article's title, never invented text; a visitor asking for a person is handed over.
 */
export async function answerFromPassages(ctx: TurnContext, gathered: Gathered): Promise<Answer> {
  const { passages } = gathered;
  const handoffAction = ctx.spec.actions.find((a) => a.type === 'handoff');
  const answer = answerWithoutModel(ctx.visitor.text || gathered.query, passages, { handoff: Boolean(handoffAction), handoffMessage: handoffAction?.message });
  if (answer.handoff) await handOff(ctx, 'the visitor asked for a person');
  // Nothing is generated, so the whole answer is one delta: clients render every mode alike.
  if (ctx.stream) await replyStream(ctx)(answer.text);
  return { text: answer.text, handoff: answer.handoff, tokens: 0, cited: passages.filter((p) => answer.cited.includes(p)), suggested: answer.suggested_actions };
}

/**
 * The reply's deltas to the conversation's sockets. The first delta of an attempt after the first carries
 * `reset`: the attempt before may have streamed part of an answer (a cut stream, a lost worker), which the
 * widget drops instead of gluing this one to it.
 */
function replyStream(ctx: TurnContext): (text: string) => Promise<void> {
  const { input, deps } = ctx;
  let restart = (input.attempt ?? 1) > 1;
  return async (text) => {
    const reset = restart;
    restart = false;
    await deps.publisher.replyDelta(input.conversationId, input.replyId, text, reset);
  };
}

/**
 * The model's rounds, streamed: each round's deltas lose their markers as they stream (a marker cut between
 * deltas is held back until it is whole), and a round's first delta after a round that said something starts
 * a new paragraph, as the stored reply will.
 */
class RoundStream {
  private readonly publish: (text: string) => Promise<void>;
  private paragraphPending = false;
  private markers: MarkerStream;

  constructor(private readonly ctx: TurnContext) {
    this.publish = replyStream(ctx);
    this.markers = new MarkerStream(ctx.shown.length);
  }

  /** A new round; `saidBefore`: an earlier round said something. */
  startRound(saidBefore: boolean): void {
    this.paragraphPending = saidBefore;
    // Numbered over the passages shown so far (kb_search results of the round before included).
    this.markers = new MarkerStream(this.ctx.shown.length);
  }

  readonly onDelta = async (raw: string): Promise<void> => {
    this.ctx.onProgress?.();
    const text = this.markers.push(raw);
    if (text) await this.send(text);
  };

  /** The round's text held back at its end (an unfinished marker-like tail). */
  async endRound(): Promise<void> {
    const held = this.markers.end();
    if (held) await this.send(held);
  }

  private async send(text: string): Promise<void> {
    const delta = this.paragraphPending ? `\n\n${text.trimStart()}` : text;
    if (this.paragraphPending && !text.trim()) return;
    this.paragraphPending = false;
    await this.publish(delta);
  }
}
