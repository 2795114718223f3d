import { z } from 'zod';
import type { ToolDefinition } from '../ports/llm';

/**
 * Page commands: `ui:command` frames the agent may send to the widget's page, which
 * dispatches them as DOM events (`ConciergeWidget.on('ui:command', …)`) — data for the
 * site's own code, never code. Off unless the site lists the commands its page handles
 * (`sites.ui_commands`); the agent can emit only those, with arguments validated here.
 *
 * The known commands have fixed arguments; any other listed name (lower snake case) takes
 * a flat object of at most 10 strings (≤ 500 characters), numbers or booleans.
 */

/** An https URL, or a path on the page's own site ("/orders/42"; never "//host"). */
const PageUrl = z
  .string()
  .max(2000)
  .refine((v) => (v.startsWith('/') && !v.startsWith('//') && !v.includes('\\')) || isHttps(v), 'an https URL or a path starting with /');
const HttpsUrl = z.string().max(2000).refine(isHttps, 'an https URL');

function isHttps(v: string): boolean {
  try {
    return new URL(v).protocol === 'https:';
  } catch {
    return false;
  }
}

export const KNOWN_PAGE_COMMANDS = {
  /** Go to a page of the site (or an https page). */
  navigate: z.object({ url: PageUrl }).strict(),
  /** Open an https page in a new tab. */
  open_url: z.object({ url: HttpsUrl }).strict(),
  /** Draw attention to an element of the page, named by a CSS selector. */
  highlight: z.object({ selector: z.string().min(1).max(200), text: z.string().max(200).optional() }).strict(),
  /** Open the site's checkout (optionally a given cart). */
  open_checkout: z.object({ cart_id: z.string().min(1).max(100).optional() }).strict(),
} as const;

const CUSTOM_ARGS = z
  .record(z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'argument names are lower snake case'), z.union([z.string().max(500), z.number().finite(), z.boolean()]))
  .refine((o) => Object.keys(o).length <= 10, 'at most 10 arguments');

/** A command name a site may list. */
export const COMMAND_NAME = /^[a-z][a-z0-9_]{0,39}$/;
/** Commands a site may list at most. */
export const MAX_SITE_COMMANDS = 20;

/** A site's list, checked (400 wording for the admin CLI); duplicates dropped, order kept. */
export function checkCommandList(names: string[]): string[] {
  const list = [...new Set(names.map((n) => n.trim()).filter(Boolean))];
  const bad = list.find((n) => !COMMAND_NAME.test(n));
  if (bad) throw new Error(`commands: '${bad}' is not a command name (lower snake case, up to 40 characters)`);
  if (list.length > MAX_SITE_COMMANDS) throw new Error(`commands: at most ${MAX_SITE_COMMANDS}`);
  return list;
}

export type PageCommandCheck = { ok: true; command: string; args: Record<string, unknown> } | { ok: false; reason: string };

/** A command the model asked for, checked against the site's list and the command's arguments. */
export function checkPageCommand(allowed: readonly string[], command: unknown, args: unknown): PageCommandCheck {
  if (typeof command !== 'string' || !allowed.includes(command)) {
    return { ok: false, reason: `command: must be one of ${allowed.join(', ')}` };
  }
  const schema = (KNOWN_PAGE_COMMANDS as Record<string, z.ZodType>)[command] ?? CUSTOM_ARGS;
  const parsed = schema.safeParse(args ?? {});
  if (!parsed.success) return { ok: false, reason: parsed.error.issues.map((i) => `args${i.path.length ? '.' + i.path.join('.') : ''}: ${i.message}`).join('; ') };
  return { ok: true, command, args: parsed.data as Record<string, unknown> };
}

/** The tool the model is offered when the site allows commands. */
export function pageCommandTool(allowed: readonly string[]): ToolDefinition {
  const described = allowed.map((name) => {
    const known = name in KNOWN_PAGE_COMMANDS ? JSON.stringify(z.toJSONSchema((KNOWN_PAGE_COMMANDS as Record<string, z.ZodType>)[name]).properties ?? {}) : 'a flat object of strings, numbers or booleans';
    return `- ${name}: args ${known}`;
  });
  return {
    name: 'page_command',
    description: `Ask the web page the visitor is on to do something. Use only when it helps the visitor, and say so in your reply. Commands:\n${described.join('\n')}`,
    parameters: {
      type: 'object',
      properties: { command: { type: 'string', enum: [...allowed] }, args: { type: 'object' } },
      required: ['command'],
    },
  };
}
