import type { ToolDefinition } from '../../ports/llm';
import type { TurnContext } from '../turn/context';

/**
 * A tool the model may call during a turn: its definition (what the model is offered) and
 * what a call does. `run` returns what the model is told: JSON, or an MCP result fenced as
 * untrusted data. A refused call is told why (the model may try again), never thrown.
 */
export interface TurnTool {
  readonly name: string;
  /** Its definition for the model this turn; null: not offered (the agent's spec or the channel leaves it out). */
  definition(ctx: TurnContext): ToolDefinition | null;
  /** Whether a call of it is run this turn, offered or not (a model may name a tool it was not offered). True when absent. */
  accepts?(ctx: TurnContext): boolean;
  run(ctx: TurnContext, args: Record<string, unknown>): Promise<string>;
}
