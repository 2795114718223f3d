import { checkPageCommand, pageCommandTool } from '../page-commands';
import type { TurnTool } from './types';

/** A `ui:command` for the page the visitor is on: only the commands its site says the page handles. */
export const pageCommand: TurnTool = {
  name: 'page_command',
  definition: (ctx) => (ctx.commands.length ? pageCommandTool(ctx.commands) : null),
  accepts: (ctx) => ctx.commands.length > 0,
  async run(ctx, args) {
    const checked = checkPageCommand(ctx.commands, args.command, args.args);
    if (!checked.ok) {
      ctx.deps.log.warn({ tool: 'page_command', conversationId: ctx.input.conversationId, reason: checked.reason }, 'page command refused');
      return JSON.stringify({ error: checked.reason });
    }
    // Data for the page's own code (a DOM event there), sent now: the page acts while the reply is written.
    await ctx.deps.publisher.pageCommand(ctx.input.conversationId, checked.command, checked.args);
    return JSON.stringify({ ok: true, sent: { command: checked.command, args: checked.args } });
  },
};
