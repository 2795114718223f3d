import type { ToolCall, ToolDefinition } from '../../ports/llm';
import type { TurnContext } from '../turn/context';
import { attachFile } from './attach-file';
import { handoff } from './handoff';
import { kbSearch } from './kb-search';
import { mcpTools } from './mcp';
import { pageCommand } from './page-command';
import { sendDigits, transferCall } from './phone';
import { showCard } from './show-card';
import { showChart } from './show-chart';
import { suggestReplies } from './suggest-replies';
import type { TurnTool } from './types';

export type { TurnTool } from './types';

/**
 * The built-in tools, in the order the model is offered them; this turn's MCP tools go
 * between the two groups.
 */
const BEFORE_EXTERNAL: readonly TurnTool[] = [suggestReplies, showCard, showChart, attachFile, pageCommand];
const AFTER_EXTERNAL: readonly TurnTool[] = [kbSearch, handoff, transferCall, sendDigits];

/** One turn's tools: what the model is offered, and a call run by name. */
export class TurnTools {
  private readonly byName: Map<string, TurnTool>;

  private constructor(
    private readonly ctx: TurnContext,
    private readonly tools: readonly TurnTool[],
    /** MCP tools are offered: the system prompt says their results are untrusted data. */
    readonly external: boolean,
  ) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
  }

  /** The built-in tools and the MCP tools of the servers the agent's actions name (listed once per turn). */
  static async forTurn(ctx: TurnContext): Promise<TurnTools> {
    const external = await mcpTools(ctx);
    return new TurnTools(ctx, [...BEFORE_EXTERNAL, ...external, ...AFTER_EXTERNAL], external.length > 0);
  }

  /** The definitions the model is offered this turn. */
  definitions(): ToolDefinition[] {
    return this.tools.flatMap((t) => t.definition(this.ctx) ?? []);
  }

  /** Runs one call; what the model is told. */
  async run(call: ToolCall): Promise<string> {
    let args: Record<string, unknown> = {};
    try {
      args = JSON.parse(call.arguments || '{}');
    } catch {
      return JSON.stringify({ error: 'arguments are not valid JSON' });
    }
    const tool = this.byName.get(call.name);
    if (!tool || !(tool.accepts?.(this.ctx) ?? true)) return JSON.stringify({ error: `unknown tool ${call.name}` });
    return tool.run(this.ctx, args);
  }
}
