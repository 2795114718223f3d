import { marked, type Token, type Tokens } from 'marked';
import { z } from 'zod';

/**
 * The contract's `rich` reply field: the reply's Markdown read into a small, validated
 * block list (paragraphs, headings, lists, quotes, code, tables) that a client renders
 * without a Markdown parser and without HTML. Tokenised by `marked`'s lexer; only what is
 * ours is written here: which blocks and spans exist, and their limits. Links are kept
 * only when https; HTML in the model's text stays text. A table row with too many or too
 * few cells is fitted to its header. Only a reply with structure (anything but plain
 * paragraphs) gets `rich`.
 */

const MAX_BLOCKS = 60;
const MAX_ROWS = 50;
const MAX_COLUMNS = 8;
const MAX_TEXT = 4000;

const Span = z
  .object({
    text: z.string().max(MAX_TEXT),
    bold: z.literal(true).optional(),
    italic: z.literal(true).optional(),
    code: z.literal(true).optional(),
    href: z.url({ protocol: /^https$/ }).max(2000).optional(),
  })
  .strict();
const Spans = z.array(Span).max(200);

export const RichBlock = z
  .discriminatedUnion('type', [
    z.object({ type: z.literal('paragraph'), spans: Spans }).strict(),
    z.object({ type: z.literal('heading'), level: z.number().int().min(1).max(3), spans: Spans }).strict(),
    z.object({ type: z.literal('list'), ordered: z.boolean(), items: z.array(Spans).min(1).max(100) }).strict(),
    z.object({ type: z.literal('quote'), spans: Spans }).strict(),
    z.object({ type: z.literal('code'), text: z.string().max(MAX_TEXT) }).strict(),
    z
      .object({
        type: z.literal('table'),
        header: z.array(z.string().max(200)).min(1).max(MAX_COLUMNS),
        rows: z.array(z.array(z.string().max(500))).max(MAX_ROWS),
      })
      .strict()
      .refine((t) => t.rows.every((r) => r.length === t.header.length), 'every row has one cell per column'),
  ])
  .meta({ description: 'One block of a rich reply: paragraph, heading, list, quote, code or table; spans are text with optional bold, italic, code and an https link' });
export const RichBlocks = z.array(RichBlock).max(MAX_BLOCKS);

export type RichSpan = z.infer<typeof Span>;
export type RichBlockValue = z.infer<typeof RichBlock>;

function spansOf(tokens: Token[] | undefined, style: Omit<RichSpan, 'text'> = {}): RichSpan[] {
  const out: RichSpan[] = [];
  for (const t of tokens ?? []) {
    switch (t.type) {
      case 'strong':
        out.push(...spansOf((t as Tokens.Strong).tokens, { ...style, bold: true }));
        break;
      case 'em':
        out.push(...spansOf((t as Tokens.Em).tokens, { ...style, italic: true }));
        break;
      case 'codespan':
        out.push({ ...style, code: true, text: (t as Tokens.Codespan).text });
        break;
      case 'link': {
        const link = t as Tokens.Link;
        const safe = /^https:\/\//i.test(link.href) && z.url({ protocol: /^https$/ }).safeParse(link.href).success;
        out.push(...spansOf(link.tokens, safe ? { ...style, href: link.href } : style));
        break;
      }
      case 'br':
        out.push({ ...style, text: '\n' });
        break;
      default: {
        // text, escape, html (kept as text, never markup), and anything else: its own tokens or its raw text.
        const nested = (t as { tokens?: Token[] }).tokens;
        if (nested?.length && t.type !== 'html') out.push(...spansOf(nested, style));
        else out.push({ ...style, text: decode((t as { text?: string }).text ?? t.raw) });
      }
    }
  }
  return merge(out);
}

/** marked escapes &, <, >, " and ' in text tokens: the spans carry the characters themselves. */
function decode(s: string): string {
  return s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e: string) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]!);
}

/** Neighbouring spans of the same style become one. */
function merge(spans: RichSpan[]): RichSpan[] {
  const out: RichSpan[] = [];
  for (const s of spans) {
    const prev = out.at(-1);
    if (prev && prev.bold === s.bold && prev.italic === s.italic && prev.code === s.code && prev.href === s.href) prev.text = (prev.text + s.text).slice(0, MAX_TEXT);
    else out.push({ ...s, text: s.text.slice(0, MAX_TEXT) });
  }
  return out.filter((s) => s.text.length);
}

const plain = (spans: RichSpan[]) => spans.map((s) => s.text).join('');

function blockOf(t: Token): RichBlockValue[] {
  switch (t.type) {
    case 'paragraph':
    case 'text':
      return [{ type: 'paragraph', spans: spansOf((t as Tokens.Paragraph).tokens ?? [{ type: 'text', raw: t.raw, text: t.raw } as Token]) }];
    case 'heading': {
      const h = t as Tokens.Heading;
      return [{ type: 'heading', level: Math.min(3, Math.max(1, h.depth)), spans: spansOf(h.tokens) }];
    }
    case 'list': {
      const l = t as Tokens.List;
      return [{ type: 'list', ordered: l.ordered, items: l.items.slice(0, 100).map((i) => spansOf(i.tokens.flatMap((x) => (x.type === 'text' || x.type === 'paragraph' ? ((x as Tokens.Text).tokens ?? [x]) : [x])))) }];
    }
    case 'blockquote':
      return [{ type: 'quote', spans: (t as Tokens.Blockquote).tokens.flatMap((x) => blockOf(x)).flatMap((b) => ('spans' in b ? b.spans : [])) }];
    case 'code':
      return [{ type: 'code', text: (t as Tokens.Code).text.slice(0, MAX_TEXT) }];
    case 'table': {
      const tb = t as Tokens.Table;
      const header = tb.header.slice(0, MAX_COLUMNS).map((c) => plain(spansOf(c.tokens)).slice(0, 200));
      // Fitted to the header: missing cells empty, extra cells dropped.
      const rows = tb.rows.slice(0, MAX_ROWS).map((r) => header.map((_, i) => (r[i] ? plain(spansOf(r[i].tokens)).slice(0, 500) : '')));
      return [{ type: 'table', header, rows }];
    }
    case 'html':
      return [{ type: 'paragraph', spans: [{ text: t.raw.trim().slice(0, MAX_TEXT) }] }];
    default:
      return []; // space, hr, def
  }
}

/**
 * The reply as rich blocks, validated; null when it has no structure beyond paragraphs
 * (then `text` says it all) or when it cannot be read (never a half-valid list).
 */
export function richBlocks(markdown: string): RichBlockValue[] | null {
  const blocks = marked
    .lexer(markdown, { gfm: true })
    .flatMap(blockOf)
    .filter((b) => b.type === 'code' || b.type === 'table' || b.type === 'list' || ('spans' in b && b.spans.length))
    .slice(0, MAX_BLOCKS);
  if (blocks.every((b) => b.type === 'paragraph' && b.spans.every((s) => !s.bold && !s.italic && !s.code && !s.href))) return null;
  const checked = RichBlocks.safeParse(blocks);
  return checked.success ? checked.data : null;
}
