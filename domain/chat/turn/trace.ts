import type { ChatMessageRow } from '../transcript';
import type { Passage } from './context';

/**
 * What one turn did, for the console's conversation debugger: returned with the turn's reply, so it is recorded in the
 * conversation workflow's history (encrypted with every other payload) and read back from there, never stored in a
 * table of its own. Bounded (every text clipped), so 200 turns a run keep the history small.
 */
export interface TurnTrace {
  /** The model's name as sent (null: the installation's LLM_MODEL, or no model at all: the answer came from the passages). */
  model: string | null;
  /** The visitor message's query the passages were searched with. */
  query: string;
  passages: Array<{ file_id: string; file_name: string; title?: string; score: number; text: string }>;
  prompt: {
    /** The agent's instructions as the system prompt opens with them. */
    instructions: string;
    /** The passages and attachments given as context, as the model reads their labels. */
    context: string[];
    /** The recent messages given as history, oldest first. */
    history: Array<{ role: string; text: string }>;
    /** The visitor's message as sent to the model. */
    message: string;
  };
  /** Each completion of the model, in order, with the tool calls it asked for and their results. */
  rounds: Array<{ ms: number; tokens: number; text: string; tool_calls: Array<{ name: string; arguments: unknown; output: string; ms: number }> }>;
  /** The answer as the model wrote it, before personal details were masked (markers removed). */
  output: string;
  /** Milliseconds of the turn's steps, measured in the activity (`retrieve`, the knowledge-base search inside `gather`, only when it ran). */
  steps: Array<{ step: 'gather' | 'retrieve' | 'generate' | 'store' | 'publish'; ms: number }>;
}

const TEXT = 600;
const OUTPUT = 8_000;
const TOOL_OUTPUT = 2_000;
const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** Collects a turn's trace as its steps run. */
export class TraceRecorder {
  private readonly trace: TurnTrace = { model: null, query: '', passages: [], prompt: { instructions: '', context: [], history: [], message: '' }, rounds: [], output: '', steps: [] };
  private started = Date.now();

  /** Times a step of the turn. */
  async step<T>(step: TurnTrace['steps'][number]['step'], run: () => Promise<T>): Promise<T> {
    const at = Date.now();
    try {
      return await run();
    } finally {
      this.trace.steps.push({ step, ms: Date.now() - at });
    }
  }

  gathered(model: string | null, query: string, passages: Passage[], instructions: string, history: ChatMessageRow[], message: string, attachments: string[]): void {
    this.trace.model = model;
    this.trace.query = clip(query, TEXT);
    this.trace.passages = passages.map((p) => ({ file_id: p.file_id, file_name: p.file_name, ...(p.title ? { title: p.title } : {}), score: p.score, text: clip(p.text, TEXT) }));
    this.trace.prompt = {
      instructions: clip(instructions, 4_000),
      context: [...passages.map((p, i) => `[${i + 1}] ${p.file_name}${p.title ? ` (${p.title})` : ''}`), ...attachments.map((a) => `attachment: ${a}`)],
      history: history.map((m) => ({ role: m.role, text: clip(m.text, TEXT) })),
      message: clip(message, 2_000),
    };
  }

  /** A round starts: its time runs until `roundDone`. */
  roundStart(): void {
    this.started = Date.now();
  }

  roundDone(text: string, tokens: number): void {
    this.trace.rounds.push({ ms: Date.now() - this.started, tokens, text: clip(text, OUTPUT), tool_calls: [] });
  }

  toolCall(name: string, args: unknown, output: string, ms: number): void {
    this.trace.rounds.at(-1)?.tool_calls.push({ name, arguments: args, output: clip(output, TOOL_OUTPUT), ms });
  }

  output(text: string): TurnTrace {
    this.trace.output = clip(text, OUTPUT);
    return this.trace;
  }
}
