import { contentStems } from './answer-without-model';

/**
 * Which retrieved passages a reply used (issue 27 item 6). The model sees the passages
 * numbered — `[1]`, `[2]`, … in the system prompt, later ones from `kb_search` numbered on
 * — and is asked to mark what it used with those numbers. The markers are read from the
 * answer and removed from what the visitor sees, the stored text and the streamed deltas.
 * A model that writes no marker is judged by what it copied: a passage counts as used only
 * when the answer repeats a run of RUN of its content words in order, so an answer that
 * ignores the instruction cites what it quotes, never everything that was retrieved.
 */

/** A passage the model was shown, by its number (1-based position in the turn's list). */
export interface NumberedPassage {
  file_id: string;
  file_name: string;
  text: string;
}

/** Content words in a row an unmarked answer must share with a passage for the passage to count as used. */
export const RUN = 4;

/** `[2]`, `[1, 3]` (several markers in a row are each matched); not a Markdown link `[1](…)` nor a reference definition `[1]: …`. */
const MARKER = /[ \t]*\[(\d{1,3}(?:[ \t]*,[ \t]*\d{1,3})*)\](?![(:])/g;
/** Code is quoted as written: fenced blocks and inline spans (an unclosed one runs to the end, the same in a prefix as in the whole). */
const CODE = /```[\s\S]*?(?:```|$)|~~~[\s\S]*?(?:~~~|$)|`[^`]*(?:`|$)/g;

/** Applies `f` to the text outside code. */
function outsideCode(text: string, f: (prose: string) => string): string {
  let out = '';
  let at = 0;
  for (const m of text.matchAll(CODE)) {
    out += f(text.slice(at, m.index)) + m[0];
    at = m.index + m[0].length;
  }
  return out + f(text.slice(at));
}

/**
 * The text without its markers of passages 1..`count`, and the numbers they named in the
 * order they first appear. A bracketed number beyond the list (`[2024]`) is not a marker
 * and stays.
 */
export function stripMarkers(text: string, count: number): { text: string; used: number[] } {
  const used: number[] = [];
  const clean = outsideCode(text, (prose) =>
    prose.replace(MARKER, (whole, list: string) => {
      const ns = list.split(',').map((n) => Number(n.trim()));
      if (!ns.every((n) => n >= 1 && n <= count)) return whole;
      for (const n of ns) if (!used.includes(n)) used.push(n);
      return '';
    }),
  );
  return { text: clean, used };
}

/** What a delta may end with that the next one could turn into a marker (or a code fence): held back until known. */
const UNSETTLED = /[ \t]*(?:\[[\d \t,]{0,20}\]?)?`{0,2}$/;

/**
 * One model round's deltas with the markers removed. A marker may arrive cut over several
 * deltas (`[`, `1`, `]`), and the space before it is removed with it, so the tail that
 * could still become one is held until the next delta settles it. Should the clean text so
 * far ever not extend what was sent (an edge of code quoting), nothing more is sent: the
 * final `reply` replaces the streamed bubble anyway.
 */
export class MarkerStream {
  private raw = '';
  private sent = '';
  private stalled = false;

  constructor(private readonly count: number) {}

  /** The clean text to send for this delta ('' when all of it is held). */
  push(delta: string): string {
    this.raw += delta;
    return this.emit(this.raw.slice(0, this.raw.length - (UNSETTLED.exec(this.raw)?.[0].length ?? 0)));
  }

  /** The round ended: whatever was held. */
  end(): string {
    return this.emit(this.raw);
  }

  private emit(settled: string): string {
    if (this.stalled) return '';
    const clean = stripMarkers(settled, this.count).text;
    if (!clean.startsWith(this.sent)) {
      this.stalled = true;
      return '';
    }
    const out = clean.slice(this.sent.length);
    this.sent = clean;
    return out;
  }
}

/** Whether `answer` repeats RUN content words of `passage` in a row (stemmed, stop words left out). */
export function sharesRun(answer: string, passage: string, run = RUN): boolean {
  const a = contentStems(answer);
  if (a.length < run) return false;
  const grams = new Set<string>();
  for (let i = 0; i + run <= a.length; i++) grams.add(a.slice(i, i + run).join(' '));
  const p = contentStems(passage);
  for (let i = 0; i + run <= p.length; i++) if (grams.has(p.slice(i, i + run).join(' '))) return true;
  return false;
}

/**
 * The passages an answer used: those its markers name (`used`, from stripMarkers), or,
 * when it has none, those it quotes a run of (sharesRun). One entry per file, in the order
 * the answer used them.
 */
export function usedFiles<P extends NumberedPassage>(answer: string, used: number[], passages: readonly P[]): P[] {
  const chosen = used.length ? used.map((n) => passages[n - 1]).filter(Boolean) : passages.filter((p) => sharesRun(answer, p.text));
  const out: P[] = [];
  for (const p of chosen) if (!out.some((o) => o.file_id === p.file_id)) out.push(p);
  return out;
}
