/** The knowledge base's port for text embeddings (providers/embeddings/embedder.ts: local or OpenAI-compatible). */

/**
 * Text embeddings for the knowledge base. Every vector is an L2-normalised Float32Array,
 * so cosine similarity is a plain dot product.
 *
 * `embed` applies no prefix. Some models embed a search query differently from the
 * passages it should find (bge prepends an instruction to queries, e5 uses "query: " /
 * "passage: "); embedders for those implement `embedQuery` / `embedPassages`, and callers
 * should go through `queryVector` / `passageVectors` below, which fall back to `embed`.
 * For all-MiniLM-L6-v2 (the local default) and OpenAI's models all of them agree.
 */
export interface Embedder {
  readonly modelId: string;
  /** Length of every vector. For an OpenAI-compatible model not in OPENAI_MODELS: 0 until the first call. */
  readonly dimension: number;
  embed(texts: string[]): Promise<Float32Array[]>;
  /** A user's question, with the model's query prefix if it has one. */
  embedQuery?(text: string): Promise<Float32Array>;
  /** Knowledge-base passages, with the model's passage prefix if it has one. */
  embedPassages?(texts: string[]): Promise<Float32Array[]>;
}

/** The vector of a search query: `embedQuery` where the embedder has it, else `embed`. */
export async function queryVector(e: Embedder, text: string): Promise<Float32Array> {
  if (e.embedQuery) return e.embedQuery(text);
  const [v] = await e.embed([text]);
  return v;
}

/** The vectors of passages to index: `embedPassages` where the embedder has it, else `embed`. */
export function passageVectors(e: Embedder, texts: string[]): Promise<Float32Array[]> {
  return e.embedPassages ? e.embedPassages(texts) : e.embed(texts);
}

export class EmbedderError extends Error {
  override name = 'EmbedderError';
}

/** Dot product of two vectors of equal length: the cosine similarity of normalised vectors. */
export function dot(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new EmbedderError(`vector lengths differ: ${a.length} vs ${b.length}`);
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}
