import { retrieve } from '../turn/gather';
import type { TurnTool } from './types';

/** More passages of the agent's knowledge, for a query of the model's own. */
export const kbSearch: TurnTool = {
  name: 'kb_search',
  definition: (ctx) =>
    ctx.spec.actions.some((a) => a.type === 'kb_search')
      ? {
          name: 'kb_search',
          description: 'Search the knowledge base for passages relevant to a query.',
          parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
        }
      : null,
  async run(ctx, args) {
    const found = await retrieve(ctx.deps, ctx.input.workspaceId, ctx.spec, String(args.query ?? ''), ctx.topK);
    // Numbered on after the passages the model has seen (one seen already keeps its number), so its markers name them too.
    const numbered = found.map((p) => {
      let i = ctx.shown.findIndex((s) => s.file_id === p.file_id && s.text === p.text);
      if (i < 0) i = ctx.shown.push(p) - 1;
      return { n: i + 1, file: p.file_name, ...(p.title ? { title: p.title } : {}), text: p.text };
    });
    return JSON.stringify({ passages: numbered, note: 'Mark each statement you take from a passage with its number n in square brackets, like [n].' });
  },
};
