import type { Embedder } from '../../domain/ports/embedder';
import { gaussian, prng } from './prose';

/** Scales `v` to unit length in place. */
export function unit(v: Float32Array): Float32Array {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i] * v[i];
  const n = Math.sqrt(s);
  for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

/**
 * A corpus of clustered random unit vectors standing in for passage embeddings (row i = passage i), and the
 * ground truth for recall: a brute-force top k. Noise is relative to the centroid (cosine to it ≈ 1 / sqrt(1 +
 * noise²): ≈ 0.7 at the default 1), so neighbours are close but not trivially so.
 */
export class VectorCorpus {
  ids: string[] = [];
  inFolder: boolean[] = [];
  vectors = new Float32Array(0);
  private readonly rand: () => number;
  private readonly centroids: Float32Array[] = [];

  constructor(readonly dim: number, clusters = 256, private readonly noise = 1, seed = 0x5ea7c4) {
    this.rand = prng(seed);
    for (let c = 0; c < clusters; c++) this.centroids.push(unit(Float32Array.from({ length: dim }, () => gaussian(this.rand))));
  }

  get size() {
    return this.ids.length;
  }

  /** A unit vector near a random centroid. */
  near(rand: () => number = this.rand): Float32Array {
    const c = this.centroids[Math.floor(rand() * this.centroids.length)];
    const scale = this.noise / Math.sqrt(this.dim);
    return unit(Float32Array.from(c, (x) => x + scale * gaussian(rand)));
  }

  /** Room for `n` more passages (exactly: the matrix is as large as the corpus). */
  grow(n: number): void {
    const next = new Float32Array((this.ids.length + n) * this.dim);
    next.set(this.vectors);
    this.vectors = next;
  }

  /** Appends a passage near a random centroid (after `grow`); its vector. */
  add(id: string, inFolder: boolean, rand: () => number): Float32Array {
    const v = this.near(rand);
    this.vectors.set(v, this.ids.length * this.dim);
    this.ids.push(id);
    this.inFolder.push(inFolder);
    return v;
  }

  /** Brute force, written apart from any index: every score, then a full sort (ties by row). */
  bruteTopK(query: Float32Array, k: number, folderOnly: boolean): string[] {
    const scored: Array<[number, number]> = [];
    for (let i = 0; i < this.ids.length; i++) {
      if (folderOnly && !this.inFolder[i]) continue;
      let s = 0;
      for (let j = 0, base = i * this.dim; j < this.dim; j++) s += this.vectors[base + j] * query[j];
      scored.push([s, i]);
    }
    scored.sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    return scored.slice(0, k).map(([, i]) => this.ids[i]);
  }
}

/** A query and the vector the embedder is to answer for it. */
export type StoredQuery = { text: string; vector: Float32Array };

/** An Embedder that answers the vector set in `next` for its text (searches one at a time), so a search's timing leaves the model out. */
export class StoredQueryEmbedder implements Embedder {
  next: StoredQuery | null = null;
  constructor(readonly modelId: string, readonly dimension: number) {}
  embed = (texts: string[]) => Promise.all(texts.map((t) => this.embedQuery(t)));
  embedQuery = async (text: string) => {
    if (this.next?.text !== text) throw new Error(`StoredQueryEmbedder: no stored vector for '${text}'`);
    return this.next.vector;
  };
}
