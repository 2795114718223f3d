import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../ids';
import type { BlobStore } from '../storage/blob-store';
import { chunkSegments, DEFAULT_CHUNKING, type ChunkOptions, type SourceSegment } from './chunker';
import { passageVectors, type Embedder } from './embedder';
import { KB_CHANGES_CHANNEL } from './files';

/** Turns a stored file into segments; throws an error whose `reason` is user-facing when it cannot. */
export type ExtractFn = (input: { filePath: string; kind: string; mime: string; fileName: string }) => Promise<{ segments: SourceSegment[] }>;

export interface IndexingDeps {
  em: EntityManager;
  blobs: BlobStore;
  extract: ExtractFn;
  embedder: () => Promise<Embedder>;
  chunking?: ChunkOptions;
  /** Passages embedded per model call. */
  embedBatch?: number;
}

export type BeginResult = 'go' | 'gone' | 'settled';

/**
 * The steps of indexing one file version, each safe to run again: chunks are replaced
 * as a set in one transaction (a re-run never duplicates them), embedding fills only
 * what is missing, and the final state moves are conditional on the current state.
 */
export class IndexingService {
  constructor(private readonly deps: IndexingDeps) {}

  private em() {
    return this.deps.em.fork();
  }

  async begin(fileId: string): Promise<BeginResult> {
    const rows = await this.em().execute<{ status: string }[]>(
      `update kb_files set status = 'processing', updated_at = now() where id = ? and status in ('pending', 'processing') returning status`,
      [fileId],
    );
    if (rows.length) return 'go';
    const exists = await this.em().execute('select 1 from kb_files where id = ?', [fileId]);
    return exists.length ? 'settled' : 'gone';
  }

  async extractAndChunk(fileId: string): Promise<number> {
    const [file] = await this.em().execute<{ sha256: string; kind: string; mime_type: string; name: string; workspace_id: string }[]>(
      'select sha256, kind, mime_type, name, workspace_id from kb_files where id = ?',
      [fileId],
    );
    if (!file) return 0;
    const { segments } = await this.deps.blobs.withLocalFile(file.sha256, (filePath) =>
      this.deps.extract({ filePath, kind: file.kind, mime: file.mime_type, fileName: file.name }),
    );
    const chunks = chunkSegments(segments, this.deps.chunking ?? DEFAULT_CHUNKING);
    await this.em().transactional(async (em) => {
      await em.execute('delete from kb_chunks where file_id = ?', [fileId]);
      for (let i = 0; i < chunks.length; i += 200) {
        const batch = chunks.slice(i, i + 200);
        await em.execute(
          `insert into kb_chunks (id, workspace_id, file_id, ordinal, text, heading, page, sheet, row_from, row_to, slide, char_start)
           values ${batch.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
          batch.flatMap((c) => [newId('psg'), file.workspace_id, fileId, c.ordinal, c.text, c.heading, c.page, c.sheet, c.rowFrom, c.rowTo, c.slide, c.charStart]),
        );
      }
      await em.execute('update kb_files set chunk_count = ?, updated_at = now() where id = ?', [chunks.length, fileId]);
    });
    return chunks.length;
  }

  /** Embeds the file's passages that have no vector from the current model; `progress` is called after each batch. */
  async embed(fileId: string, progress: (done: number) => void = () => undefined): Promise<number> {
    const embedder = await this.deps.embedder();
    const batchSize = this.deps.embedBatch ?? 32;
    let done = 0;
    for (;;) {
      const rows = await this.em().execute<{ id: string; text: string; heading: string | null }[]>(
        `select id, text, heading from kb_chunks where file_id = ? and (embedding is null or embedding_model <> ?) order by ordinal limit ?`,
        [fileId, embedder.modelId, batchSize],
      );
      if (!rows.length) return done;
      const vectors = await passageVectors(embedder, rows.map((r) => (r.heading && !r.text.includes(r.heading) ? `${r.heading}\n${r.text}` : r.text)));
      await this.em().transactional(async (em) => {
        for (let i = 0; i < rows.length; i++) {
          const v = vectors[i];
          await em.execute('update kb_chunks set embedding = ?, embedding_model = ?, embedding_dim = ? where id = ?', [
            Buffer.from(v.buffer, v.byteOffset, v.byteLength),
            embedder.modelId,
            v.length,
            rows[i].id,
          ]);
        }
      });
      done += rows.length;
      progress(done);
    }
  }

  async finish(fileId: string): Promise<'active' | 'error'> {
    const rows = await this.em().execute<{ status: 'active' | 'error'; workspace_id: string }[]>(
      `update kb_files set
         status = case when chunk_count > 0 then 'active' else 'error' end,
         error_message = case when chunk_count > 0 then null else 'no text could be extracted' end,
         updated_at = now()
       where id = ? and status = 'processing' returning status, workspace_id`,
      [fileId],
    );
    if (rows[0]) await this.notify(rows[0].workspace_id);
    return rows[0]?.status ?? 'error';
  }

  async fail(fileId: string, reason: string): Promise<boolean> {
    const rows = await this.em().execute<{ workspace_id: string }[]>(
      `update kb_files set status = 'error', error_message = ?, updated_at = now() where id = ? and status in ('pending', 'processing') returning workspace_id`,
      [reason.slice(0, 1000), fileId],
    );
    if (rows[0]) await this.notify(rows[0].workspace_id);
    return rows.length > 0;
  }

  /** Versions handed to an indexing workflow and still pending or processing, untouched since `before` (the reconciliation's). */
  async dispatchedUnfinished(before: Date, limit: number): Promise<string[]> {
    const rows = await this.em().execute<{ id: string }[]>(
      `select id from kb_files where status in ('pending', 'processing') and index_dispatched_at is not null and updated_at < ? order by updated_at limit ?`,
      [before, limit],
    );
    return rows.map((r) => r.id);
  }

  private async notify(workspaceId: string): Promise<void> {
    await this.em().execute('select pg_notify(?, ?)', [KB_CHANGES_CHANNEL, workspaceId]);
  }
}
