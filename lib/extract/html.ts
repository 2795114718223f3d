/** HTML → text segments split at h1–h6 (used for HTML files, DOCX via mammoth and email bodies). */
import type { FormatCallback } from 'html-to-text';
import { SectionBuilder } from './sections';
import type { Segment } from './types';

const HEADING_MARK = '\u0001H\u0001';

const headingFormatter: FormatCallback = (elem, walk, builder) => {
  builder.openBlock({ leadingLineBreaks: 2 });
  builder.addLiteral(HEADING_MARK);
  walk(elem.children, builder);
  builder.closeBlock({ trailingLineBreaks: 2 });
};

const OPTIONS = {
  wordwrap: false as const,
  limits: { maxInputLength: 200 * 1024 * 1024 },
  formatters: { segmentHeading: headingFormatter },
  selectors: [
    ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((selector) => ({ selector, format: 'segmentHeading' })),
    { selector: 'a', options: { ignoreHref: true } },
    { selector: 'img', format: 'skip' },
    { selector: 'head', format: 'skip' },
    { selector: 'script', format: 'skip' },
    { selector: 'style', format: 'skip' },
    { selector: 'noscript', format: 'skip' },
    { selector: 'template', format: 'skip' },
    { selector: 'svg', format: 'skip' },
    { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false, maxColumnWidth: 200 } },
  ],
};

async function convert(html: string): Promise<string> {
  const { htmlToText } = await import('html-to-text');
  return htmlToText(html, OPTIONS);
}

/** Plain text of an HTML fragment (no heading markers). */
export async function htmlToPlainText(html: string): Promise<string> {
  return (await convert(html)).split(HEADING_MARK).join('');
}

export async function htmlToSegments(html: string, base: Partial<Segment> = {}): Promise<Segment[]> {
  const text = await convert(html);
  const out = new SectionBuilder(base);
  for (const line of text.split('\n')) {
    if (line.startsWith(HEADING_MARK)) out.addHeading(line.slice(HEADING_MARK.length));
    else out.addLine(line);
  }
  return out.finish();
}
