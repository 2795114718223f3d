import type { PgNotifications, Subscription } from '../db/notifications';
import type { EntityManager } from '@mikro-orm/postgresql';
import { KB_CHANGES_CHANNEL } from './files';

/** One workspace's searchable vectors: current, active versions only, one row per passage. */
export interface WorkspaceVectors {
  ids: string[];
  fileIds: string[];
  folderIds: (string | null)[];
  dim: number;
  /** Row-major, L2-normalised: row i is matrix[i*dim .. (i+1)*dim). */
  matrix: Float32Array;
}

/**
 * Exact dense search over an in-memory per-workspace matrix loaded from PostgreSQL
 * (no approximate index: recall is 1.0 at any filter). A workspace's matrix is dropped
 * whenever any process NOTIFYs a knowledge-base change for it (upload, index finished,
 * move, delete), so a deleted or replaced version is never served; while the LISTEN
 * connection is down nothing is cached at all.
 */
export class DenseIndex {
  private readonly cache = new Map<string, Promise<WorkspaceVectors>>();
  private readonly gens = new Map<string, number>();
  private readonly listener: Subscription | null;

  /** Without notifications (the CLI) nothing is cached: every search loads its workspace's vectors. */
  constructor(
    private readonly em: EntityManager,
    notifications: PgNotifications | null,
  ) {
    this.listener =
      notifications?.subscribe(
        [KB_CHANGES_CHANNEL],
        { onNotify: (_channel, workspaceId) => this.invalidate(workspaceId), onLost: () => this.cache.clear(), onReady: () => this.cache.clear() },
        'kb dense index',
      ) ?? null;
  }

  async start(): Promise<void> {
    await this.listener?.start();
  }

  invalidate(workspaceId: string): void {
    this.gens.set(workspaceId, (this.gens.get(workspaceId) ?? 0) + 1);
    this.cache.delete(workspaceId);
  }

  async vectors(workspaceId: string, modelId: string): Promise<WorkspaceVectors> {
    if (!this.listener?.listening) return this.load(workspaceId, modelId);
    const hit = this.cache.get(workspaceId);
    if (hit) return hit;
    const gen = this.gens.get(workspaceId) ?? 0;
    const loading = this.load(workspaceId, modelId);
    this.cache.set(workspaceId, loading);
    loading
      .then(() => {
        // Changed while loading: the loaded copy may be stale, don't keep it.
        if ((this.gens.get(workspaceId) ?? 0) !== gen) this.cache.delete(workspaceId);
      })
      .catch(() => this.cache.delete(workspaceId));
    return loading;
  }

  private async load(workspaceId: string, modelId: string): Promise<WorkspaceVectors> {
    const rows = await this.em.fork().execute<{ id: string; file_id: string; folder_id: string | null; embedding: Buffer; embedding_dim: number }[]>(
      `select c.id, c.file_id, d.folder_id, c.embedding, c.embedding_dim
       from kb_chunks c
       join kb_files f on f.id = c.file_id and f.is_current and f.status = 'active'
       join kb_documents d on d.id = f.document_id
       where c.workspace_id = ? and c.embedding_model = ? and c.embedding is not null
       order by c.id`,
      [workspaceId, modelId],
    );
    const dim = rows[0]?.embedding_dim ?? 0;
    const matrix = new Float32Array(rows.length * dim);
    rows.forEach((r, i) => {
      // Copied out: a bytea Buffer may sit at an offset not aligned for a Float32Array view.
      const bytes = r.embedding.buffer.slice(r.embedding.byteOffset, r.embedding.byteOffset + dim * 4);
      matrix.set(new Float32Array(bytes), i * dim);
    });
    return { ids: rows.map((r) => r.id), fileIds: rows.map((r) => r.file_id), folderIds: rows.map((r) => r.folder_id), dim, matrix };
  }

  async stop(): Promise<void> {
    await this.listener?.stop();
  }
}

/** Exact top-k by dot product (vectors are unit length, so this is cosine) over the rows `keep` admits. */
export function exactTopK(v: WorkspaceVectors, query: Float32Array, k: number, keep: (i: number) => boolean): Array<{ i: number; score: number }> {
  const { dim, matrix } = v;
  const top: Array<{ i: number; score: number }> = [];
  for (let i = 0; i < v.ids.length; i++) {
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
