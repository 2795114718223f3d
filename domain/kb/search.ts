import type { EntityManager } from '@mikro-orm/postgresql';
import { KbChunk } from '../../db/entities';
import { DomainError } from '../errors';
import type { DenseIndex } from './dense-index';
import { EmbedderError, queryVector, type Embedder } from '../ports/embedder';
import type { KnowledgeBaseRepository } from './repository';

export interface SearchMatch {
  id: string;
  name: string;
  score: number;
  file_id: string;
  folder_id: string | null;
  text: string;
}

export interface SearchQuery {
  query: string;
  top_k: number;
  folder_id?: string;
  kb_id?: string;
}

/** Candidates taken from each side before fusion. */
const CANDIDATES = 50;
/** Reciprocal rank fusion constant (Cormack et al.): dampens the weight of top ranks. */
const RRF_K = 60;

/**
 * Hybrid search: PostgreSQL full text (websearch_to_tsquery + ts_rank, English
 * stemming) and exact dense cosine similarity, fused by reciprocal rank. The score is
 * the fused value divided by its maximum (first on both sides), so it lies in [0, 1].
 * Only current, active versions are searched (the passages' text is read with the same
 * condition, so a version replaced a moment ago is never returned). `folder_id` covers
 * that folder and its subfolders; `kb_id` is one file; both together must both hold.
 * The two sides run concurrently: the full-text query is sent before the dense scan.
 */
export class SearchService {
  constructor(
    private readonly em: EntityManager,
    private readonly embedder: () => Promise<Embedder>,
    private readonly dense: DenseIndex,
    private readonly kb: Pick<KnowledgeBaseRepository, 'currentActiveFiles' | 'existingFiles' | 'folderSubtree'>,
  ) {}

  async search(workspaceId: string, q: SearchQuery): Promise<SearchMatch[]> {
    const em = this.em.fork();
    let folders: Set<string> | null = null;
    if (q.folder_id) {
      folders = await this.kb.folderSubtree(em, workspaceId, [q.folder_id]);
      if (!folders.size) throw new DomainError('folder_not_found', `No folder with id '${q.folder_id}' in this workspace`);
    }
    if (q.kb_id) {
      if (!(await this.kb.existingFiles(em, workspaceId, [q.kb_id])).size) throw new DomainError('not_found', `No file with id '${q.kb_id}' in this workspace`);
    }

    const [lexical, semantic] = await Promise.all([this.fullText(em, workspaceId, q, folders), this.denseSearch(workspaceId, q, folders)]);
    const fused = new Map<string, number>();
    lexical.forEach((id, rank) => fused.set(id, (fused.get(id) ?? 0) + 1 / (RRF_K + rank + 1)));
    semantic.forEach((id, rank) => fused.set(id, (fused.get(id) ?? 0) + 1 / (RRF_K + rank + 1)));
    const best = [...fused.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, q.top_k);
    if (!best.length) return [];
    const max = 2 / (RRF_K + 1);
    // The passages, then their files' state: a passage whose file is no longer the current active version is left out.
    const chunks = await em.find(KbChunk, { id: { $in: best.map(([id]) => id) } }, { fields: ['id', 'text', 'fileId'] });
    const files = await this.kb.currentActiveFiles(em, [...new Set(chunks.map((c) => c.fileId))]);
    const byId = new Map(chunks.filter((c) => files.has(c.fileId)).map((c) => [c.id, c]));
    return best
      .filter(([id]) => byId.has(id))
      .map(([id, s]) => {
        const c = byId.get(id)!;
        const f = files.get(c.fileId)!;
        return { id, name: f.name, score: Math.min(1, Math.round((s / max) * 1e6) / 1e6), file_id: c.fileId, folder_id: f.folderId, text: c.text };
      });
  }

  private async fullText(em: EntityManager, workspaceId: string, q: SearchQuery, folders: Set<string> | null): Promise<string[]> {
    const params: unknown[] = [q.query, workspaceId];
    let filter = '';
    if (folders) {
      filter += ` and d.folder_id in (${[...folders].map(() => '?').join(',')})`;
      params.push(...folders);
    }
    if (q.kb_id) {
      filter += ' and c.file_id = ?';
      params.push(q.kb_id);
    }
    // raw SQL: the full-text ranking (websearch_to_tsquery, @@ on the generated tsv, ts_rank ordering) has no ORM form.
    // ts_rank, not the cover-density ts_rank_cd: every matching passage is ranked, and ts_rank costs half as much.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<{ id: string }[]>(
      `with q as (select websearch_to_tsquery('english', ?) as tsq)
       select c.id from kb_chunks c
       join kb_files f on f.id = c.file_id and f.is_current and f.status = 'active'
       join kb_documents d on d.id = f.document_id, q
       where c.workspace_id = ? and c.tsv @@ q.tsq${filter}
       order by ts_rank(c.tsv, q.tsq) desc, c.id
       limit ${CANDIDATES}`,
      params,
    );
    return rows.map((r) => r.id);
  }

  private async denseSearch(workspaceId: string, q: SearchQuery, folders: Set<string> | null): Promise<string[]> {
    const embedder = await this.embedder();
    const [vectors, query] = await Promise.all([
      this.dense.vectors(workspaceId, embedder.modelId),
      queryVector(embedder, q.query).catch((err: unknown) => {
        // A missing model or an unreachable embeddings provider is the operator's to fix; say so.
        if (err instanceof EmbedderError) throw new DomainError('embeddings_unavailable', `Search by meaning is unavailable: ${err.message}`);
        throw err;
      }),
    ]);
    if (!vectors.size) return [];
    // The full-text query is on its way first: the scan below holds the thread, PostgreSQL does not wait for it.
    await new Promise<void>((resolve) => setImmediate(resolve));
    return vectors.search(query, CANDIDATES, { folders, fileId: q.kb_id }).map((h) => h.id);
  }
}
