import { applyElementTool, ELEMENT_KINDS, elementTools, type ElementKind } from '../elements';
import type { ToolDefinition } from '../../ports/llm';
import type { TurnTool } from './types';

/** The element tools' definitions, built once from their zod schemas (elements.ts). */
const DEFINITIONS = new Map(elementTools(ELEMENT_KINDS).map((t) => [t.kind, { name: t.name, description: t.description, parameters: t.parameters } satisfies ToolDefinition]));

/** An element tool's definition, offered when the agent enables its kind (`reply_elements`) on the web. */
export function elementDefinition(kind: ElementKind): (ctx: { kinds: readonly ElementKind[] }) => ToolDefinition | null {
  return (ctx) => (ctx.kinds.includes(kind) ? DEFINITIONS.get(kind)! : null);
}

/**
 * A tool adding a validated element (chips, a card, a chart) to the reply. Run whether offered or not:
 * a kind the agent does not enable is refused with the reason, as an invalid element is.
 */
export function replyElementTool(name: string, kind: ElementKind): TurnTool {
  return {
    name,
    definition: elementDefinition(kind),
    async run(ctx, args) {
      const element = applyElementTool(name, args, ctx.kinds, ctx.elements)!;
      // Refused elements never reach the visitor; the model is told why and may try again.
      if (!element.ok) ctx.deps.log.warn({ tool: name, conversationId: ctx.input.conversationId, output: element.output.slice(0, 500) }, 'reply element refused');
      return element.output;
    },
  };
}
