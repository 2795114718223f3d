import type { Segment } from '../../lib/extract/types';

/** What an extractor yields: a piece of text with where it came from. */
export type SourceSegment = Segment;

export interface Chunk {
  ordinal: number;
  text: string;
  heading: string | null;
  page: number | null;
  sheet: string | null;
  rowFrom: number | null;
  rowTo: number | null;
  slide: number | null;
  /** Offset of the chunk's first character in the document's text, segments joined by blank lines. */
  charStart: number;
}

export interface ChunkOptions {
  /** Aimed-for size; a chunk closes once it reaches this. */
  targetTokens: number;
  /** Hard ceiling: a longer paragraph is split on sentences, then words. */
  maxTokens: number;
  /** Carried from the end of one chunk into the next within the same page, slide or sheet. */
  overlapTokens: number;
}

/**
 * ~300-400 tokens with 50 of overlap: inside the 300-500 band, and close to what
 * the default model reads (all-MiniLM-L6-v2 truncates at 256 word pieces; full-text search
 * still covers a chunk's tail).
 */
export const DEFAULT_CHUNKING: ChunkOptions = { targetTokens: 300, maxTokens: 400, overlapTokens: 50 };

/** Word pieces per word for English prose with a BERT-style tokenizer: a cheap, stable estimate. */
const TOKENS_PER_WORD = 1.3;
export const estimateTokens = (text: string) => Math.ceil(countWords(text) * TOKENS_PER_WORD);
const countWords = (text: string) => (text.match(/\S+/g) ?? []).length;

const HEADING = /^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$/;

interface Unit {
  key: string;
  page?: number;
  sheet?: string;
  slide?: number;
  rows: boolean;
}

function unitOf(s: SourceSegment): Unit {
  if (s.sheet !== undefined) return { key: `sheet:${s.sheet}`, sheet: s.sheet, rows: s.row !== undefined };
  if (s.slide !== undefined) return { key: `slide:${s.slide}`, slide: s.slide, rows: false };
  if (s.page !== undefined) return { key: `page:${s.page}`, page: s.page, rows: false };
  return { key: 'doc', rows: false };
}

/** Splits an over-long paragraph into pieces under `maxTokens`, on sentence ends, else on words. */
function splitLong(text: string, maxTokens: number): string[] {
  if (estimateTokens(text) <= maxTokens) return [text];
  const sentences = text.match(/[^.!?\n]+[.!?]*\s*/g) ?? [text];
  const out: string[] = [];
  let cur = '';
  for (const s of sentences) {
    if (estimateTokens(s) > maxTokens) {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
      const words = s.split(/\s+/).filter(Boolean);
      const perPiece = Math.max(1, Math.floor(maxTokens / TOKENS_PER_WORD));
      for (let i = 0; i < words.length; i += perPiece) out.push(words.slice(i, i + perPiece).join(' '));
      continue;
    }
    if (estimateTokens(cur + s) > maxTokens && cur.trim()) {
      out.push(cur.trim());
      cur = '';
    }
    cur += s;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

function tailWords(text: string, tokens: number): string {
  const words = text.split(/\s+/).filter(Boolean);
  const n = Math.floor(tokens / TOKENS_PER_WORD);
  return n > 0 ? words.slice(-n).join(' ') : '';
}

/**
 * Chunks on structure: never across pages, slides or sheets; paragraphs and rows are
 * kept whole when they fit; markdown-style headings start a new chunk and label the
 * chunks under them. Within one page (or sheet) consecutive chunks overlap a little so
 * a sentence cut at a boundary is still found.
 */
export function chunkSegments(segments: SourceSegment[], opts: ChunkOptions = DEFAULT_CHUNKING): Chunk[] {
  const chunks: Chunk[] = [];
  let offset = 0;
  type Open = { unit: Unit; parts: string[]; heading: string | null; rowFrom: number | null; rowTo: number | null; charStart: number };
  let current = null as Open | null;
  let lastUnitKey: string | null = null;
  let lastText = '';

  const close = () => {
    if (!current) return;
    const text = current.parts.join('\n').trim();
    if (text) {
      chunks.push({
        ordinal: chunks.length,
        text,
        heading: current.heading,
        page: current.unit.page ?? null,
        sheet: current.unit.sheet ?? null,
        rowFrom: current.rowFrom,
        rowTo: current.rowTo,
        slide: current.unit.slide ?? null,
        charStart: current.charStart,
      });
      lastText = text;
    }
    current = null;
  };

  const open = (unit: Unit, heading: string | null, at: number, withOverlap: boolean) => {
    const overlap = withOverlap && !unit.rows && lastText ? tailWords(lastText, opts.overlapTokens) : '';
    current = { unit, parts: overlap ? [overlap] : [], heading, rowFrom: null, rowTo: null, charStart: at };
  };

  let heading: string | null = null;
  for (const seg of segments) {
    const unit = unitOf(seg);
    if (unit.key !== lastUnitKey) {
      close();
      heading = seg.heading ?? null;
      lastText = '';
      lastUnitKey = unit.key;
    } else if (seg.heading !== undefined && seg.heading !== heading) {
      close();
      heading = seg.heading;
    }
    const pieces = unit.rows ? [seg.text.trim()] : seg.text.split(/\n\s*\n/);
    for (const raw of pieces) {
      const para = raw.trim();
      const at = offset;
      offset += raw.length + 2;
      if (!para) continue;
      const h = !unit.rows ? HEADING.exec(para.split('\n')[0]) : null;
      if (h) {
        close();
        heading = h[2];
        lastText = '';
      }
      for (const piece of splitLong(para, opts.maxTokens)) {
        const before = current as Open | null;
        if (before && estimateTokens([...before.parts, piece].join('\n')) > opts.maxTokens) close();
        if (!current) open(unit, heading, at, true);
        const c = current as unknown as Open;
        c.parts.push(piece);
        if (unit.rows && seg.row !== undefined) {
          c.rowFrom ??= seg.row;
          c.rowTo = seg.row;
        }
        if (estimateTokens(c.parts.join('\n')) >= opts.targetTokens) close();
      }
    }
  }
  close();
  return chunks;
}
