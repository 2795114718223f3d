import { z } from 'zod';

/**
 * The reply elements an agent may add to its text (the contract's `suggested_actions`,
 * `cards`, `charts`): declarative data, validated here before a reply is stored or sent,
 * never code or markup. The model adds them through tools the agent spec enables
 * (`{type: "reply_elements", kinds: [...]}`); an invalid call is refused with the reason
 * (the model may try again) and nothing invalid reaches a visitor.
 */
const HttpsUrl = z.url({ protocol: /^https$/ }).max(2000);

export const SuggestedAction = z.string().trim().min(1).max(60);
export const SuggestedActions = z.array(SuggestedAction).min(1).max(5).meta({ description: 'Follow-up replies the visitor can send with one click' });

export const CardButton = z
  .union([
    z.object({ label: z.string().trim().min(1).max(40), url: HttpsUrl }).strict(),
    z.object({ label: z.string().trim().min(1).max(40), reply: z.string().trim().min(1).max(200).meta({ description: 'Text sent as the visitor\'s message when clicked' }) }).strict(),
  ])
  .meta({ description: 'An https link, or a reply the visitor sends by clicking' });

export const Card = z
  .object({
    title: z.string().trim().min(1).max(120),
    text: z.string().trim().max(1000).optional(),
    image_url: HttpsUrl.optional(),
    buttons: z.array(CardButton).max(3).optional(),
  })
  .strict()
  .meta({ description: 'A title, text, an optional https image and up to three buttons (a link or a reply)' });

export const Chart = z
  .object({
    type: z.enum(['bar', 'line', 'pie']),
    title: z.string().trim().max(120).optional(),
    labels: z.array(z.string().trim().min(1).max(40)).min(1).max(24),
    series: z
      .array(z.object({ name: z.string().trim().min(1).max(60), values: z.array(z.number().finite()).min(1).max(24) }).strict())
      .min(1)
      .max(6),
  })
  .strict()
  .superRefine((c, ctx) => {
    c.series.forEach((s, i) => {
      if (s.values.length !== c.labels.length) ctx.addIssue({ code: 'custom', path: ['series', i, 'values'], message: `has ${s.values.length} values for ${c.labels.length} labels` });
    });
    if (c.type === 'pie' && c.series.length !== 1) ctx.addIssue({ code: 'custom', path: ['series'], message: 'a pie chart has exactly one series' });
    if (c.type === 'pie' && c.series.some((s) => s.values.some((v) => v < 0))) ctx.addIssue({ code: 'custom', path: ['series'], message: 'a pie chart has no negative values' });
  })
  .meta({ description: 'A small declarative chart (bar, line or pie): labels and series of numbers, rendered by the widget as SVG' });

export const Citation = z
  .object({
    file_id: z.string(),
    title: z.string().meta({
      description: "The document's title: its first heading (or an HTML page's <title>) as recorded when indexed, else its file name without the extension, dashes and underscores as spaces",
    }),
    url: z
      .string()
      .optional()
      .meta({ description: 'Only for a knowledge-base file the agent may hand out (as POST /file_url decides): a signed download link, valid for 24 hours, signed afresh in /history. Other documents are named, never linked' }),
  })
  .meta({ description: 'A document whose passages the reply used (only those), shown to the visitor as a source' });

/** A knowledge-base file the agent attached (tool attach_file): its key for POST /file_url and a signed link. */
export const AgentAttachment = z
  .object({
    file_key: z.string().regex(/^kb\/file_[0-9a-f]{24}$/),
    file_name: z.string(),
    mime_type: z.string(),
    url: z.string().meta({ description: 'A signed link, valid for 24 hours; POST /file_url with file_key signs a fresh one' }),
  })
  .meta({ description: 'A file of the knowledge base the agent attached to its reply' });

export type CardElement = z.infer<typeof Card>;
export type ChartElement = z.infer<typeof Chart>;
export type AgentAttachmentElement = z.infer<typeof AgentAttachment>;
export type ElementKind = 'suggested_actions' | 'cards' | 'charts' | 'attachments';
export const ELEMENT_KINDS = ['suggested_actions', 'cards', 'charts', 'attachments'] as const;

/** What a turn's tools collected: the reply's extras besides its citations. */
export interface ReplyElements {
  suggested_actions: string[];
  cards: Array<z.infer<typeof Card>>;
  charts: Array<z.infer<typeof Chart>>;
  attachments: AgentAttachmentElement[];
}

export const emptyElements = (): ReplyElements => ({ suggested_actions: [], cards: [], charts: [], attachments: [] });

/** Per reply, at most. */
export const MAX_ELEMENTS = { suggested_actions: 5, cards: 5, charts: 3, attachments: 3 };
const MAX = MAX_ELEMENTS;

/** The tools for the kinds the agent enables, as the model sees them (JSON Schema from the same zod schemas). */
export function elementTools(kinds: readonly ElementKind[]): Array<{ name: string; description: string; parameters: Record<string, unknown>; kind: ElementKind }> {
  const schema = (t: z.ZodType) => z.toJSONSchema(t, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  const all = [
    {
      kind: 'suggested_actions' as const,
      name: 'suggest_replies',
      description: 'Offer up to 5 short follow-up replies (at most 60 characters each) the customer can click.',
      parameters: schema(z.object({ suggestions: SuggestedActions }).strict()),
    },
    {
      kind: 'cards' as const,
      name: 'show_card',
      description: 'Show a card under your answer: a title, text, an optional https image and up to 3 buttons (an https link, or a reply the customer sends by clicking).',
      parameters: schema(Card),
    },
    {
      kind: 'charts' as const,
      name: 'show_chart',
      description: 'Show a small chart under your answer: bar, line or pie, with labels and one or more series of numbers (one value per label).',
      parameters: schema(Chart),
    },
    {
      kind: 'attachments' as const,
      name: 'attach_file',
      description: 'Attach a file of your knowledge base to your answer (by the file_id of a passage you were given), when the customer needs the document itself.',
      parameters: schema(z.object({ file_id: z.string() }).strict()),
    },
  ];
  return all.filter((t) => kinds.includes(t.kind));
}

/**
 * Applies one element tool call: validated, added to `into` within the per-reply limits.
 * Returns what the model is told (ok, or the reason it was refused); null when the tool is not an element tool.
 */
export function applyElementTool(name: string, args: unknown, kinds: readonly ElementKind[], into: ReplyElements): { ok: boolean; output: string } | null {
  const kind = name === 'suggest_replies' ? 'suggested_actions' : name === 'show_card' ? 'cards' : name === 'show_chart' ? 'charts' : null;
  if (!kind) return null;
  if (!kinds.includes(kind)) return { ok: false, output: JSON.stringify({ error: `${name} is not enabled for this agent` }) };
  const parsed =
    kind === 'suggested_actions' ? z.object({ suggestions: SuggestedActions }).strict().safeParse(args) : kind === 'cards' ? Card.safeParse(args) : Chart.safeParse(args);
  if (!parsed.success) return { ok: false, output: JSON.stringify({ error: `invalid ${name}: ${z.prettifyError(parsed.error)}` }) };
  if (kind === 'suggested_actions') {
    const add = (parsed.data as { suggestions: string[] }).suggestions.filter((s) => !into.suggested_actions.includes(s));
    into.suggested_actions.push(...add.slice(0, MAX.suggested_actions - into.suggested_actions.length));
  } else if (into[kind].length >= MAX[kind]) {
    return { ok: false, output: JSON.stringify({ error: `at most ${MAX[kind]} ${kind} per reply` }) };
  } else {
    (into[kind] as unknown[]).push(parsed.data);
  }
  return { ok: true, output: JSON.stringify({ ok: true, note: 'Shown under your answer; do not repeat it in the text.' }) };
}
