/**
 * A long document is read in chunks, each answered on its own against the whole schema;
 * the partial answers are merged into one: arrays concatenated (an item that two chunks
 * both produced, as overlapping text may make them, kept once), objects merged key by
 * key, and each scalar taken from the chunk whose text best supports it. The merged
 * value is validated like any other; see `mergePartials`.
 */

export interface Partial {
  /** The chunk's answer (valid against the schema on its own). */
  data: unknown;
  /** The chunk's text, to judge which value it supports. */
  text: string;
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const normalise = (s: string) => s.toLowerCase().replace(/\s+/g, ' ').trim();

/**
 * How well a chunk's text supports a scalar: an empty value (null, '') least, then the
 * model's "not stated" fallbacks (0, false); a value found verbatim in the text (case and
 * spacing aside; a number in its written forms, not inside a longer number) most.
 */
export function support(value: unknown, text: string): number {
  if (value === null || value === undefined || value === '') return 0;
  if (value === 0 || value === false) return 0.5;
  const hay = normalise(text);
  if (typeof value === 'string') return hay.includes(normalise(value)) ? 3 : 1;
  if (typeof value === 'number') {
    const forms = new Set([String(value), value.toFixed(2), value.toLocaleString('en-US'), value.toLocaleString('en-US', { minimumFractionDigits: 2 })]);
    const escape = (f: string) => f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return [...forms].some((f) => new RegExp(`(?<![\\d.,])${escape(f)}(?![\\d]|[.,]\\d)`).test(hay)) ? 3 : 1;
  }
  // A boolean true says nothing about where it came from: any non-empty answer.
  return 1;
}

function mergeValues(values: Array<{ value: unknown; text: string }>): unknown {
  const present = values.filter((v) => v.value !== undefined);
  if (!present.length) return undefined;
  if (present.every((v) => Array.isArray(v.value))) {
    const seen = new Set<string>();
    const out: unknown[] = [];
    for (const v of present) {
      for (const item of v.value as unknown[]) {
        const key = JSON.stringify(item);
        if (seen.has(key)) continue;
        seen.add(key);
        out.push(item);
      }
    }
    return out;
  }
  if (present.every((v) => isPlainObject(v.value))) {
    const keys: string[] = [];
    for (const v of present) for (const k of Object.keys(v.value as object)) if (!keys.includes(k)) keys.push(k);
    const out: Record<string, unknown> = {};
    for (const k of keys) {
      const merged = mergeValues(present.map((v) => ({ value: (v.value as Record<string, unknown>)[k], text: v.text })));
      if (merged !== undefined) out[k] = merged;
    }
    return out;
  }
  // Scalars (or values of mixed kinds): the best-supported one; ties go to the value most chunks agree on, then the earliest chunk.
  const counts = new Map<string, number>();
  for (const v of present) counts.set(JSON.stringify(v.value), (counts.get(JSON.stringify(v.value)) ?? 0) + 1);
  let best = present[0];
  let bestScore = -1;
  for (const v of present) {
    const score = support(v.value, v.text) * 1000 + (counts.get(JSON.stringify(v.value)) ?? 0);
    if (score > bestScore) {
      best = v;
      bestScore = score;
    }
  }
  return best.value;
}

/**
 * The chunks' answers as one. `valid` decides whether the merge satisfies the schema (a
 * concatenation can pass a `maxItems`, a merged object may break a `oneOf`); when it does
 * not, the best single chunk's answer (the most supported scalars) is taken instead, which
 * is valid on its own. Null when there is no partial at all.
 */
export function mergePartials(partials: Partial[], valid: (data: unknown) => boolean): { data: unknown; merged: boolean } | null {
  const c = mergeCandidates(partials);
  if (!c) return null;
  if (c.merged === undefined) return { data: c.best, merged: false };
  return valid(c.merged) ? { data: c.merged, merged: true } : { data: c.best, merged: false };
}

/**
 * What `mergePartials` chooses between, for a caller that validates elsewhere (in a
 * thread, ./validate-thread.ts): the merge (undefined for a single partial) and the best
 * single chunk's answer.
 */
export function mergeCandidates(partials: Partial[]): { merged: unknown; best: unknown } | null {
  if (!partials.length) return null;
  if (partials.length === 1) return { merged: undefined, best: partials[0].data };
  const merged = mergeValues(partials.map((p) => ({ value: p.data, text: p.text })));
  const scored = partials.map((p) => ({ p, score: totalSupport(p.data, p.text) }));
  scored.sort((a, b) => b.score - a.score);
  return { merged, best: scored[0].p.data };
}

function totalSupport(value: unknown, text: string): number {
  if (Array.isArray(value)) return value.reduce<number>((n, v) => n + totalSupport(v, text), 0);
  if (isPlainObject(value)) return Object.values(value).reduce<number>((n, v) => n + totalSupport(v, text), 0);
  return support(value, text);
}

/**
 * Splits a document's text into chunks of at most `maxChars`, at paragraph breaks where
 * it can (then at line breaks, then anywhere), with no overlap: each chunk is a
 * different part of the document, so arrays concatenate without doubling.
 */
export function chunkText(text: string, maxChars: number): string[] {
  const chunks: string[] = [];
  let rest = text.trim();
  while (rest.length > maxChars) {
    const window = rest.slice(0, maxChars);
    let cut = window.lastIndexOf('\n\n');
    if (cut < maxChars / 2) cut = window.lastIndexOf('\n');
    if (cut < maxChars / 2) cut = window.lastIndexOf(' ');
    if (cut < maxChars / 2) cut = maxChars;
    chunks.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) chunks.push(rest);
  return chunks;
}
