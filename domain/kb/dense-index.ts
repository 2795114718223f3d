import { exactSearch, MetricKind } from 'usearch';
import type { PgNotifications, Subscription } from '../../db/notifications';
import type { EntityManager } from '@mikro-orm/postgresql';
import { KB_CHANGES_CHANNEL } from './files';

/** A `concierge_kb_changes` payload: the workspace and, for a change of one document's or one file's passages, which. */
export interface KbChange {
  workspace_id: string;
  document_id?: string;
  file_id?: string;
}

/** Reads a notice; anything that is not a KbChange is taken as a bare workspace id (reload all of it). */
export function parseKbChange(payload: string): KbChange {
  if (payload.startsWith('{')) {
    try {
      const c = JSON.parse(payload) as KbChange;
      if (typeof c.workspace_id === 'string') return c;
    } catch {
      // fall through
    }
  }
  return { workspace_id: payload };
}

export interface VectorRow {
  id: string;
  file_id: string;
  document_id: string;
  folder_id: string | null;
  embedding: Buffer;
  embedding_dim: number;
}

/** String ↔ small integer, so per-row file, document and folder are Int32Array cells. */
class Codes {
  private readonly byName = new Map<string | null, number>();
  readonly names: (string | null)[] = [];
  code(name: string | null): number {
    let c = this.byName.get(name);
    if (c === undefined) {
      c = this.names.length;
      this.byName.set(name, c);
      this.names.push(name);
    }
    return c;
  }
  find(name: string | null): number | undefined {
    return this.byName.get(name);
  }
}

export interface DenseFilter {
  /** Admit only rows whose folder is one of these. */
  folders?: Set<string> | null;
  /** Admit only this file's rows. */
  fileId?: string;
}

export interface DenseHit {
  row: number;
  id: string;
  score: number;
}

/** Admitted rows up to this share of the matrix are gathered and scanned exactly in float32; above it the int8 pass runs over all rows. */
const GATHER_SHARE = 1 / 8;
/** Rows the int8 pass hands to the exact re-scoring at least. */
const MIN_CANDIDATES = 1024;
/** Bound on float32 SIMD summation error for unit vectors (dim × 2⁻²⁴: 9.2e-5 at 1,536 dims), with room. */
const F32_SLACK = 2e-4;

/**
 * One workspace's searchable vectors (current, active versions only, one row per passage)
 * as a float32 matrix and an int8 copy of it, both with spare capacity so one file's rows
 * are appended, removed (the last rows move into the holes) or re-foldered in place.
 *
 * Search is exact. The int8 pass (usearch's SIMD `exactSearch`, a quarter of the float32
 * bytes) picks candidates; they are re-scored from float32 in double precision; the result
 * is accepted only when provably the exact top-k: with q̃ = round(s·q), x̃ = round(s·x) and
 * rounding errors u, |s²·q·x − q̃·x̃| ≤ ½‖q̃‖₁ + ‖u_q‖∞·‖x̃‖₁ + ½‖u_q‖₁ (or the Cauchy–Schwarz
 * form, whichever is smaller), so no row outside the candidates can score above (the last
 * candidate's int8 score + that bound) / s². When the k-th re-scored candidate is not above
 * it, the float32 SIMD scan decides instead (also exact).
 */
export class WorkspaceVectors {
  size = 0;
  ids: string[] = [];
  matrix: Float32Array;
  private quant: Int8Array;
  private rowFile: Int32Array;
  private rowDoc: Int32Array;
  private rowFolder: Int32Array;
  private readonly files = new Codes();
  private readonly docs = new Codes();
  private readonly folders = new Codes();
  /** int8 units per 1.0; chosen from the first rows, lowered (and the int8 copy rebuilt) if a row would clip. */
  private scale = 0;
  /** Upper bounds over all rows ever held (since the last re-quantisation) of ‖x̃‖₁, ‖x̃‖₂ and ‖s·x − x̃‖₂. */
  private l1max = 0;
  private l2max = 0;
  private errL2max = 0;
  private scratch = new Float32Array(0);

  constructor(
    readonly dim: number,
    capacity = 0,
  ) {
    this.matrix = new Float32Array(capacity * dim);
    this.quant = new Int8Array(capacity * dim);
    this.rowFile = new Int32Array(capacity);
    this.rowDoc = new Int32Array(capacity);
    this.rowFolder = new Int32Array(capacity);
  }

  get capacity(): number {
    return this.rowFile.length;
  }

  fileId(row: number): string {
    return this.files.names[this.rowFile[row]]!;
  }

  folderId(row: number): string | null {
    return this.folders.names[this.rowFolder[row]];
  }

  /** Bytes held: both matrices and the per-row arrays at their capacity, plus the passage id strings (V8 one-byte strings, pointer each). */
  bytes(): number {
    const perRowArrays = this.capacity * 3 * 4 + this.ids.length * 8;
    const idStrings = this.ids.reduce((n, id) => n + 16 + Math.ceil(id.length / 8) * 8, 0);
    return this.matrix.byteLength + this.quant.byteLength + perRowArrays + idStrings;
  }

  /** Appends rows (embeddings as stored: float32, L2-normalised). */
  append(rows: VectorRow[]): void {
    if (!rows.length) return;
    const { dim } = this;
    if (this.size + rows.length > this.capacity) this.grow(Math.max(this.size + rows.length, Math.ceil(this.capacity * 1.5)));
    let maxAbs = 0;
    const start = this.size;
    for (const r of rows) {
      const i = this.size++;
      // Copied out: a bytea Buffer may sit at an offset not aligned for a Float32Array view.
      const bytes = r.embedding.buffer.slice(r.embedding.byteOffset, r.embedding.byteOffset + dim * 4);
      this.matrix.set(new Float32Array(bytes), i * dim);
      for (let j = i * dim; j < (i + 1) * dim; j++) maxAbs = Math.max(maxAbs, Math.abs(this.matrix[j]));
      this.ids.push(r.id);
      this.rowFile[i] = this.files.code(r.file_id);
      this.rowDoc[i] = this.docs.code(r.document_id);
      this.rowFolder[i] = this.folders.code(r.folder_id);
    }
    if (this.scale === 0 || maxAbs * this.scale > 127) this.requantize(127 / (maxAbs || 1));
    else for (let i = start; i < this.size; i++) this.quantizeRow(i);
  }

  /** Removes every row of these documents and/or files; returns how many went. */
  remove(match: { documentId?: string; fileId?: string }): number {
    const doc = match.documentId === undefined ? undefined : this.docs.find(match.documentId);
    const file = match.fileId === undefined ? undefined : this.files.find(match.fileId);
    if (doc === undefined && file === undefined) return 0;
    let removed = 0;
    // Descending, so the last row moved into a hole is never itself one to remove.
    for (let i = this.size - 1; i >= 0; i--) {
      if (this.rowDoc[i] !== doc && this.rowFile[i] !== file) continue;
      const last = --this.size;
      if (i !== last) {
        const { dim } = this;
        this.matrix.copyWithin(i * dim, last * dim, (last + 1) * dim);
        this.quant.copyWithin(i * dim, last * dim, (last + 1) * dim);
        this.ids[i] = this.ids[last];
        this.rowFile[i] = this.rowFile[last];
        this.rowDoc[i] = this.rowDoc[last];
        this.rowFolder[i] = this.rowFolder[last];
      }
      this.ids.pop();
      removed++;
    }
    return removed;
  }

  private grow(capacity: number): void {
    const { dim, size } = this;
    const m = new Float32Array(capacity * dim);
    m.set(this.matrix.subarray(0, size * dim));
    this.matrix = m;
    const q = new Int8Array(capacity * dim);
    q.set(this.quant.subarray(0, size * dim));
    this.quant = q;
    const int32 = (a: Int32Array) => {
      const b = new Int32Array(capacity);
      b.set(a.subarray(0, size));
      return b;
    };
    this.rowFile = int32(this.rowFile);
    this.rowDoc = int32(this.rowDoc);
    this.rowFolder = int32(this.rowFolder);
  }

  private requantize(scale: number): void {
    this.scale = scale;
    [this.l1max, this.l2max, this.errL2max] = [0, 0, 0];
    for (let i = 0; i < this.size; i++) this.quantizeRow(i);
  }

  private quantizeRow(i: number): void {
    const { dim, matrix, quant, scale } = this;
    let [l1, l2, err] = [0, 0, 0];
    for (let j = i * dim; j < (i + 1) * dim; j++) {
      const x = Math.round(matrix[j] * scale);
      const u = matrix[j] * scale - x;
      quant[j] = x;
      l1 += Math.abs(x);
      l2 += x * x;
      err += u * u;
    }
    this.l1max = Math.max(this.l1max, l1);
    this.l2max = Math.max(this.l2max, Math.sqrt(l2));
    this.errL2max = Math.max(this.errL2max, Math.sqrt(err));
  }

  /** Rows the filter admits (all when there is none). */
  private admitted(filter: DenseFilter): Int32Array | null {
    if (!filter.folders && filter.fileId === undefined) return null;
    const file = filter.fileId === undefined ? -1 : (this.files.find(filter.fileId) ?? -2);
    let folderOk: Uint8Array | null = null;
    if (filter.folders) {
      folderOk = new Uint8Array(this.folders.names.length);
      for (const f of filter.folders) {
        const c = this.folders.find(f);
        if (c !== undefined) folderOk[c] = 1;
      }
    }
    const out = new Int32Array(this.size);
    let n = 0;
    for (let i = 0; i < this.size; i++) {
      if (file !== -1 && this.rowFile[i] !== file) continue;
      if (folderOk && !folderOk[this.rowFolder[i]]) continue;
      out[n++] = i;
    }
    return out.subarray(0, n);
  }

  /** The exact top-k rows by dot product (cosine: rows and query are unit length), best first, ties by passage id. */
  search(query: Float32Array, k: number, filter: DenseFilter = {}): DenseHit[] {
    const rows = this.admitted(filter);
    const m = rows ? rows.length : this.size;
    if (m === 0 || k <= 0) return [];
    if (rows && m <= this.size * GATHER_SHARE) return this.float32(query, k, rows);
    const candidates = Math.max(MIN_CANDIDATES, rows ? Math.ceil((k * 4 * this.size) / m) : k * 4);
    if (candidates < this.size) {
      const hits = this.int8(query, k, candidates, rows);
      if (hits) {
        this.counts.int8++;
        return hits;
      }
    }
    this.counts.float32++;
    return this.float32(query, k, rows);
  }

  /** How searches were decided: by the int8 pass (proven) or by the float32 scan. */
  readonly counts = { int8: 0, float32: 0 };

  /** int8 candidates re-scored exactly; null when the bound does not prove them the top k. */
  private int8(query: Float32Array, k: number, candidates: number, rows: Int32Array | null): DenseHit[] | null {
    const { dim, scale } = this;
    const qi = new Int8Array(dim);
    let [qL1, qL2, uInf, uL1, uL2] = [0, 0, 0, 0, 0];
    for (let j = 0; j < dim; j++) {
      const x = Math.max(-127, Math.min(127, Math.round(query[j] * scale)));
      const u = Math.abs(query[j] * scale - x);
      qi[j] = x;
      qL1 += Math.abs(x);
      qL2 += x * x;
      uInf = Math.max(uInf, u);
      uL1 += u;
      uL2 += u * u;
    }
    // |s²·q·x − q̃·x̃| = |q̃·u_x + u_q·x̃ + u_q·u_x|: bounded by L1/L∞ and by Cauchy–Schwarz; the smaller holds.
    const l1Bound = 0.5 * qL1 + uInf * this.l1max + 0.5 * uL1;
    const l2Bound = Math.sqrt(qL2) * this.errL2max + Math.sqrt(uL2) * (this.l2max + this.errL2max);
    const bound = Math.min(l1Bound, l2Bound) / (scale * scale) + F32_SLACK;
    const found = exactSearch(this.quant.subarray(0, this.size * dim), qi, dim, candidates, MetricKind.IP, 1);
    const keys = found.keys as BigUint64Array;
    // usearch's int8 inner-product "distance" is minus the integer dot product; rows outside score at most this.
    const ceiling = -found.distances[keys.length - 1] / (scale * scale) + bound;
    let admit: Uint8Array | null = null;
    if (rows) {
      admit = new Uint8Array(this.size);
      for (const r of rows) admit[r] = 1;
    }
    const picked: number[] = [];
    for (const key of keys) if (!admit || admit[Number(key)]) picked.push(Number(key));
    const hits = this.rescore(query, picked);
    return hits.length >= k && hits[k - 1].score > ceiling ? hits.slice(0, k) : null;
  }

  /** usearch's float32 SIMD scan over the admitted rows (gathered into one block) or all, re-scored in double. */
  private float32(query: Float32Array, k: number, rows: Int32Array | null): DenseHit[] {
    const { dim } = this;
    const m = rows ? rows.length : this.size;
    let data: Float32Array;
    if (rows) {
      // Kept for the next small filter only: a large one's copy is dropped after use.
      const buffer = this.scratch.length >= m * dim ? this.scratch : new Float32Array(m * dim);
      if (m <= this.size * GATHER_SHARE) this.scratch = buffer;
      // A view at offset 0: usearch ignores a typed array's byteOffset.
      data = new Float32Array(buffer.buffer, 0, m * dim);
      for (let n = 0; n < m; n++) data.set(this.matrix.subarray(rows[n] * dim, (rows[n] + 1) * dim), n * dim);
    } else data = this.matrix.subarray(0, m * dim);
    const count = Math.min(m, k + 16);
    // A copy: usearch also ignores the query's byteOffset.
    const found = exactSearch(data, Float32Array.from(query), dim, count, MetricKind.IP, 1);
    const keys = found.keys as BigUint64Array;
    const picked = Array.from(keys, (key) => (rows ? rows[Number(key)] : Number(key)));
    const hits = this.rescore(query, picked);
    // float32 "distance" is 1 − dot; rows outside score at most the last one's dot plus rounding.
    const ceiling = 1 - found.distances[keys.length - 1] + F32_SLACK;
    if (count === m || (hits.length >= k && hits[k - 1].score > ceiling)) return hits.slice(0, k);
    return this.rescore(query, rows ?? Array.from({ length: m }, (_, i) => i)).slice(0, k);
  }

  /** Dot products in double precision, best first, ties by passage id. */
  rescore(query: Float32Array, rows: ArrayLike<number>): DenseHit[] {
    const { dim, matrix } = this;
    const hits: DenseHit[] = [];
    for (let n = 0; n < rows.length; n++) {
      const r = rows[n];
      let s = 0;
      for (let j = 0, base = r * dim; j < dim; j++) s += matrix[base + j] * query[j];
      hits.push({ row: r, id: this.ids[r], score: s });
    }
    return hits.sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }
}

const ROW_SELECT = `select c.id, c.file_id, f.document_id, d.folder_id, c.embedding, c.embedding_dim
  from kb_chunks c
  join kb_files f on f.id = c.file_id and f.is_current and f.status = 'active'
  join kb_documents d on d.id = f.document_id
  where c.workspace_id = ? and c.embedding_model = ? and c.embedding is not null`;

interface Entry {
  modelId: string;
  vectors: WorkspaceVectors | null;
  /** The load, then each change applied in notice order; a search waits for what is queued before it. */
  chain: Promise<void>;
}

/**
 * The per-workspace matrices of this process, loaded from PostgreSQL once and then kept
 * in step by `concierge_kb_changes` notices: a notice naming a document or a file makes
 * only that one's rows change (removed, then its current active passages re-read and
 * appended: indexed, deleted, moved, a new version made current); a bare workspace id
 * drops the whole matrix. Changes apply in notice order, each read after the previous
 * one applied, and a search waits for those already queued, so a deleted or replaced
 * version is never served. While the LISTEN connection is down nothing is cached.
 */
export class DenseIndex {
  private readonly cache = new Map<string, Entry>();
  private readonly listener: Subscription | null;
  /** Whole-workspace loads so far (a file change must not cause one). */
  loads = 0;

  /** Without notifications (the CLI) nothing is cached: every search loads its workspace's vectors. */
  constructor(
    private readonly em: EntityManager,
    notifications: PgNotifications | null,
  ) {
    this.listener =
      notifications?.subscribe(
        [KB_CHANGES_CHANNEL],
        { onNotify: (_channel, payload) => this.apply(parseKbChange(payload)), onLost: () => this.cache.clear(), onReady: () => this.cache.clear() },
        'kb dense index',
      ) ?? null;
  }

  async start(): Promise<void> {
    await this.listener?.start();
  }

  /** Drops a workspace's matrix: the next search loads it whole. */
  invalidate(workspaceId: string): void {
    this.cache.delete(workspaceId);
  }

  /** Applies one change notice to the cached matrix, if any. */
  apply(change: KbChange): void {
    const entry = this.cache.get(change.workspace_id);
    if (!entry) return;
    if (!change.document_id && !change.file_id) {
      this.cache.delete(change.workspace_id);
      return;
    }
    entry.chain = entry.chain.then(async () => {
      if (this.cache.get(change.workspace_id) !== entry || !entry.vectors) return;
      const by = change.document_id ? 'f.document_id' : 'c.file_id';
      const rows = await this.rows(change.workspace_id, entry.modelId, ` and ${by} = ?`, [change.document_id ?? change.file_id]);
      entry.vectors.remove({ documentId: change.document_id, fileId: change.file_id });
      const dim = rows[0]?.embedding_dim ?? entry.vectors.dim;
      if (dim !== entry.vectors.dim) {
        // The first passages of an empty workspace fix its width; any other change of width reloads it.
        if (entry.vectors.size) throw new Error('embedding dimension changed');
        entry.vectors = new WorkspaceVectors(dim, rows.length);
      }
      entry.vectors.append(rows);
    });
    // A change that could not be applied leaves the matrix unknown: drop it.
    entry.chain = entry.chain.catch(() => {
      if (this.cache.get(change.workspace_id) === entry) this.cache.delete(change.workspace_id);
    });
  }

  async vectors(workspaceId: string, modelId: string): Promise<WorkspaceVectors> {
    if (!this.listener?.listening) return this.load(workspaceId, modelId);
    let entry = this.cache.get(workspaceId);
    if (!entry || entry.modelId !== modelId) {
      const e: Entry = { modelId, vectors: null, chain: Promise.resolve() };
      e.chain = this.load(workspaceId, modelId).then((v) => void (e.vectors = v));
      e.chain.catch(() => {
        if (this.cache.get(workspaceId) === e) this.cache.delete(workspaceId);
      });
      this.cache.set(workspaceId, (entry = e));
    }
    const chain = entry.chain;
    await chain;
    // Dropped meanwhile (connection lost, a change failed): the copy may be stale, ask again.
    if (this.cache.get(workspaceId) !== entry || !entry.vectors) return this.vectors(workspaceId, modelId);
    return entry.vectors;
  }

  private rows(workspaceId: string, modelId: string, where: string, params: unknown[]): Promise<VectorRow[]> {
    // raw SQL: a bulk read of a workspace's vectors joined to their file's current/active state and document's folder in
    // one consistent statement (the entities hold no relations to join through), read as plain rows, not entities.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().execute<VectorRow[]>(`${ROW_SELECT}${where}`, [workspaceId, modelId, ...params]);
  }

  private async load(workspaceId: string, modelId: string): Promise<WorkspaceVectors> {
    this.loads++;
    const rows = await this.rows(workspaceId, modelId, '', []);
    const v = new WorkspaceVectors(rows[0]?.embedding_dim ?? 0, rows.length);
    v.append(rows);
    return v;
  }

  async stop(): Promise<void> {
    await this.listener?.stop();
  }
}

/** Exact top-k by dot product over the rows `keep` admits: the plain scan, the reference the SIMD path is tested against. */
export function exactTopK(v: WorkspaceVectors, query: Float32Array, k: number, keep: (i: number) => boolean): Array<{ i: number; score: number }> {
  const { dim, matrix } = v;
  const top: Array<{ i: number; score: number }> = [];
  for (let i = 0; i < v.size; i++) {
    if (!keep(i)) continue;
    let s = 0;
    const base = i * dim;
    for (let j = 0; j < dim; j++) s += matrix[base + j] * query[j];
    if (top.length < k) {
      top.push({ i, score: s });
      if (top.length === k) top.sort((a, b) => b.score - a.score);
    } else if (s > top[k - 1].score) {
      top[k - 1] = { i, score: s };
      for (let m = k - 1; m > 0 && top[m].score > top[m - 1].score; m--) [top[m], top[m - 1]] = [top[m - 1], top[m]];
    }
  }
  return top.sort((a, b) => b.score - a.score);
}
