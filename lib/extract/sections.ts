import type { Segment } from './types';

/**
 * Collects text into segments split at headings: each heading starts a new segment
 * whose `heading` is that heading and whose text begins with it (so a heading with no
 * body still ends up in the index).
 */
export class SectionBuilder {
  private heading: string | undefined;
  private lines: string[] = [];
  readonly segments: Segment[] = [];

  constructor(private readonly base: Partial<Segment> = {}) {}

  addHeading(text: string): void {
    const h = text.replace(/\s+/g, ' ').trim();
    if (!h) return;
    this.flush();
    this.heading = h;
    this.lines.push(h);
  }

  addLine(text: string): void {
    this.lines.push(text);
  }

  private flush(): void {
    const text = this.lines.join('\n').trim();
    this.lines = [];
    if (!text) return;
    const seg: Segment = { ...this.base, text };
    if (this.heading) seg.heading = this.heading;
    this.segments.push(seg);
  }

  finish(): Segment[] {
    this.flush();
    return this.segments;
  }
}

/** Normalises extracted text: no NULs (Postgres text cannot hold them), tidy blank lines. */
export function tidyText(text: string): string {
  return text
    .replace(/\u0000/g, '')
    .replace(/\r\n?/g, '\n')
    .replace(/[ \t\u00a0]+\n/g, '\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}
