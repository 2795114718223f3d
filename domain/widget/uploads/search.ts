import type { EntityManager } from '@mikro-orm/postgresql';
import { WidgetUploadChunk } from '../../../db/entities';
import type { AgentAttachmentElement } from '../../chat/elements';
import type { VisitorCitation } from '../../chat/transcript';
import { chunkSegments, DEFAULT_CHUNKING, type ChunkOptions } from '../../kb/chunker';
import { dot, passageVectors, queryVector, type Embedder } from '../../ports/embedder';
import type { Repositories } from '../../repositories';
import type { SiteRow } from '../sites';
import type { UploadLinks } from './links';
import { DEFAULT_UPLOAD_INDEX_CHARS, forbidden, type Attachment, type UploadPassage, type UploadService, type UploadStatusValue } from './records';

export interface UploadSearchDeps {
  em: EntityManager;
  records: UploadService;
  links: UploadLinks;
  repos: Pick<Repositories, 'conversations' | 'agents' | 'kb'>;
  embedder: () => Promise<Embedder>;
  /** Parsed text longer than this is also indexed for search (WIDGET_UPLOAD_INDEX_CHARS). */
  indexChars?: number;
  chunking?: ChunkOptions;
}

/**
 * Uploads as the agent and the visitor find them again: a long upload's passages chunked
 * and embedded for search (the owner of widget_upload_chunks; the upload rows are read
 * through the records), and the signed links of /file_url, history's attachments and
 * citations.
 */
export class UploadSearchService {
  private readonly indexChars: number;

  constructor(private readonly deps: UploadSearchDeps) {
    this.indexChars = deps.indexChars ?? DEFAULT_UPLOAD_INDEX_CHARS;
  }

  private em() {
    return this.deps.em.fork();
  }

  /** Whether an upload's text is long enough to be indexed for search (run indexForSearch then). */
  needsIndexing(upload: { status?: UploadStatusValue; parsed_chars?: number | null; content?: string | null }): boolean {
    if (upload.status !== undefined && upload.status !== 'ready') return false;
    return (upload.parsed_chars ?? upload.content?.length ?? 0) > this.indexChars;
  }

  /**
   * Chunks (the knowledge base's chunker) and embeds an upload's text into
   * widget_upload_chunks. Idempotent: the set of passages is replaced in one
   * transaction. Returns the number of passages (0 for an upload without text).
   */
  async indexForSearch(uploadId: string): Promise<number> {
    const content = await this.deps.records.readyContent(uploadId);
    if (!content) return 0;
    const chunks = chunkSegments([{ text: content }], this.deps.chunking ?? DEFAULT_CHUNKING);
    const embedder = await this.deps.embedder();
    const vectors: Float32Array[] = [];
    for (let i = 0; i < chunks.length; i += 32) vectors.push(...(await passageVectors(embedder, chunks.slice(i, i + 32).map((c) => c.text))));
    await this.em().transactional(async (em) => {
      await em.nativeDelete(WidgetUploadChunk, { uploadId });
      for (let i = 0; i < chunks.length; i += 100) {
        const batch = chunks.slice(i, i + 100);
        await em.insertMany(
          WidgetUploadChunk,
          batch.map((c, j) => ({ uploadId, ord: c.ordinal, text: c.text, embedding: Array.from(vectors[i + j]), embeddingModel: embedder.modelId })),
        );
      }
    });
    return chunks.length;
  }

  /** The `k` passages of the conversation's indexed uploads closest in meaning to `query` (cosine). */
  async search(conversationId: string, query: string, k = 5): Promise<UploadPassage[]> {
    if (!query.trim() || k <= 0) return [];
    const embedder = await this.deps.embedder();
    const em = this.em();
    const names = await this.deps.records.readyNames(conversationId);
    if (!names.size) return [];
    const rows = await em.find(
      WidgetUploadChunk,
      { uploadId: { $in: [...names.keys()] }, embeddingModel: embedder.modelId },
      { fields: ['uploadId', 'ord', 'text', 'embedding'], orderBy: { uploadId: 'asc', ord: 'asc' } },
    );
    if (!rows.length) return [];
    const q = await queryVector(embedder, query);
    return rows
      .map((r) => ({ upload_id: r.uploadId, file_name: names.get(r.uploadId)!, text: r.text, score: Math.round(dot(q, Float32Array.from(r.embedding ?? [])) * 1e6) / 1e6 }))
      .sort((a, b) => b.score - a.score)
      .slice(0, k);
  }

  /** A signed link to a knowledge-base file's bytes (an agent's attachment). */
  signKbFile(file: { sha256: string; mime_type: string; name: string }): string {
    return this.deps.links.kbFile(file);
  }

  /**
   * A reply's citations as /history shows them: a linked knowledge-base file gets a freshly signed
   * link (the stored one may have expired) only while the site's agent may still hand it out (the rule
   * of POST /file_url: the business may have taken it out of the agent's selection since), else none;
   * the others as they are (never linked).
   */
  async resignCitations(site: SiteRow, citations: VisitorCitation[]): Promise<VisitorCitation[]> {
    if (!citations.some((c) => c.url)) return citations;
    const em = this.em();
    const agent = await this.deps.repos.agents.findAgent(em, site.workspace_id, site.agent_id);
    const kb = agent?.spec.knowledge_base ?? { folder_ids: [], file_ids: [] };
    const out: VisitorCitation[] = [];
    for (const c of citations) {
      const file = c.url && /^file_[0-9a-f]{24}$/.test(c.file_id) ? await this.deps.repos.kb.downloadableKbFile(em, site.workspace_id, c.file_id, kb) : null;
      out.push({ file_id: c.file_id, title: c.title, ...(file ? { url: this.signKbFile(file) } : {}) });
    }
    return out;
  }

  /**
   * A freshly signed link for `file_key`: an upload of this conversation, or a
   * knowledge-base file the site's agent may show (an active file it selects by id, or
   * the current active version of a file under one of its folders). Anything else,
   * including a conversation that is not the site's, is 403 forbidden.
   */
  async fileUrl(site: SiteRow, conversationId: string, fileKey: string): Promise<{ url: string }> {
    const em = this.em();
    // The site's own conversations only: not another site's of the same workspace and agent.
    if (!(await this.deps.repos.conversations.webConversationOnSite(em, site.id, conversationId))) throw forbidden();
    const m = /^(upload|kb)\/([a-z]+_[0-9a-f]{24})$/.exec(fileKey);
    if (!m) throw forbidden();
    if (m[1] === 'upload') {
      const url = await this.deps.records.linkOf(site, conversationId, m[2]);
      if (!url) throw forbidden();
      return { url };
    }
    const agent = await this.deps.repos.agents.findAgent(em, site.workspace_id, site.agent_id);
    const kb = agent?.spec.knowledge_base ?? { folder_ids: [], file_ids: [] };
    const file = await this.deps.repos.kb.downloadableKbFile(em, site.workspace_id, m[2], kb);
    if (!file) throw forbidden();
    return { url: this.signKbFile(file) };
  }

  /**
   * A stored message's attachments with freshly signed links, in their order: a
   * visitor's uploads (`upload_id`) and the agent's knowledge-base files (`file_key`
   * `kb/…`); anything whose bytes are gone is left out.
   */
  async describeStored(attachments: unknown[]): Promise<Array<Attachment | AgentAttachmentElement>> {
    const items = attachments.filter((a): a is Record<string, unknown> => typeof a === 'object' && a !== null);
    const uploads = new Map((await this.deps.records.describe(items.map((a) => a.upload_id).filter((id): id is string => typeof id === 'string'))).map((u) => [u.upload_id, u]));
    const kbIds = items.map((a) => (typeof a.file_key === 'string' ? /^kb\/(file_[0-9a-f]{24})$/.exec(a.file_key)?.[1] : undefined)).filter((id): id is string => !!id);
    const files = await this.deps.repos.kb.filesById(this.em(), kbIds);
    const out: Array<Attachment | AgentAttachmentElement> = [];
    for (const a of items) {
      if (typeof a.upload_id === 'string' && uploads.has(a.upload_id)) out.push(uploads.get(a.upload_id)!);
      const kb = typeof a.file_key === 'string' ? files.get(a.file_key.slice(3)) : undefined;
      if (kb) out.push({ file_key: `kb/${kb.id}`, file_name: kb.name, mime_type: kb.mimeType, url: this.signKbFile({ sha256: kb.sha256, mime_type: kb.mimeType, name: kb.name }) });
    }
    return out;
  }
}
