import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../errors';
import { Filters, keysetPage } from '../pagination';
import { newId } from '../ids';
import type { BlobStore, StagedBlob } from '../storage/blob-store';

export const KB_CHANGES_CHANNEL = 'concierge_kb_changes';
export const KB_INDEX_OUTBOX_CHANNEL = 'concierge_kb_index_outbox';

export type FileStatus = 'pending' | 'processing' | 'active' | 'error';

export interface FileView {
  id: string;
  name: string;
  status: FileStatus;
  mime_type: string;
  file_size: number;
  folder_id: string | null;
  chunk_count: number;
  version: number;
  error_message: string | null;
  created_at: string;
  updated_at: string;
}

interface FileRow {
  id: string;
  workspace_id: string;
  document_id: string;
  version: number;
  is_current: boolean;
  name: string;
  status: FileStatus;
  error_message: string | null;
  mime_type: string;
  kind: string;
  file_size: string | number;
  sha256: string;
  chunk_count: number;
  folder_id: string | null;
  created_at: Date;
  updated_at: Date;
}

const FILE_SELECT = `select f.*, d.folder_id from kb_files f join kb_documents d on d.id = f.document_id`;

export function fileView(r: FileRow): FileView {
  return {
    id: r.id,
    name: r.name,
    status: r.status,
    mime_type: r.mime_type,
    file_size: Number(r.file_size),
    folder_id: r.folder_id ?? null,
    chunk_count: r.chunk_count,
    version: r.version,
    error_message: r.error_message,
    created_at: new Date(r.created_at).toISOString(),
    updated_at: new Date(r.updated_at).toISOString(),
  };
}


const folderNotFound = (id: string) => new ApiError(404, 'folder_not_found', `No folder with id '${id}' in this workspace`);
const fileNotFound = (id: string) => new ApiError(404, 'not_found', `No file with id '${id}' in this workspace`);

/**
 * Knowledge-base files. A document is a name in a folder; uploading the same name to
 * the same folder adds a version and makes it current; deleting the current version
 * makes the previous one current again. Every change that alters what search may
 * return NOTIFYs `concierge_kb_changes`, so every process drops its dense index of
 * that workspace.
 */
export class FileService {
  constructor(
    private readonly em: EntityManager,
    private readonly blobs: BlobStore,
  ) {}

  /** Records an uploaded (staged, sniffed) file as the new current version of its document. */
  async create(
    workspaceId: string,
    input: { staged: StagedBlob; name: string; folderId: string | null; mime: string; kind: string },
  ): Promise<FileView> {
    if (input.folderId) {
      const rows = await this.em.fork().execute('select 1 from kb_folders where id = ? and workspace_id = ?', [input.folderId, workspaceId]);
      if (!rows.length) throw folderNotFound(input.folderId);
    }
    const sha = await this.blobs.commit(input.staged);
    try {
      return await this.em.fork().transactional(async (em) => {
        const [doc] = await em.execute<{ id: string }[]>(
          `insert into kb_documents (id, workspace_id, folder_id, name) values (?, ?, ?, ?)
           on conflict (workspace_id, coalesce(folder_id, ''), name) do update set name = excluded.name
           returning id`,
          [newId('doc'), workspaceId, input.folderId, input.name],
        );
        // Serialises concurrent uploads of one document: versions stay gap-free and one is current.
        await em.execute('select id from kb_documents where id = ? for update', [doc.id]);
        const [{ next }] = await em.execute<{ next: number }[]>('select coalesce(max(version), 0) + 1 as next from kb_files where document_id = ?', [doc.id]);
        await em.execute('update kb_files set is_current = false, updated_at = now() where document_id = ? and is_current', [doc.id]);
        const id = newId('file');
        await em.execute(
          `insert into kb_files (id, workspace_id, document_id, version, is_current, name, status, mime_type, kind, file_size, sha256, created_at, updated_at)
           values (?, ?, ?, ?, true, ?, 'pending', ?, ?, ?, ?, clock_timestamp(), clock_timestamp())`,
          [id, workspaceId, doc.id, next, input.name, input.mime, input.kind, input.staged.size, sha],
        );
        await em.execute('select pg_notify(?, ?), pg_notify(?, ?)', [KB_INDEX_OUTBOX_CHANNEL, id, KB_CHANGES_CHANNEL, JSON.stringify({ workspace_id: workspaceId, document_id: doc.id })]);
        const [row] = await em.execute<FileRow[]>(`${FILE_SELECT} where f.id = ?`, [id]);
        return fileView(row);
      });
    } catch (err) {
      await this.releaseBlob(sha);
      const code = (err as { code?: string }).code;
      if (code === '23503' && input.folderId) throw folderNotFound(input.folderId);
      throw err;
    }
  }

  async list(
    workspaceId: string,
    q: { folderId: string | null; status?: FileStatus; limit: number; cursor?: string },
  ): Promise<{ files: FileView[]; next_cursor: string | null }> {
    const filters = new Filters('f.workspace_id = ?', workspaceId).add('f.is_current');
    if (q.folderId) filters.add('d.folder_id = ?', q.folderId);
    else filters.add('d.folder_id is null');
    if (q.status) filters.add('f.status = ?', q.status);
    const page = await keysetPage<FileRow>(this.em.fork(), FILE_SELECT, filters, q, { alias: 'f' });
    return { files: page.rows.map(fileView), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<FileView> {
    return fileView(await this.row(this.em.fork(), workspaceId, id));
  }

  private async row(em: EntityManager, workspaceId: string, id: string): Promise<FileRow> {
    const [row] = await em.execute<FileRow[]>(`${FILE_SELECT} where f.id = ? and f.workspace_id = ?`, [id, workspaceId]);
    if (!row) throw fileNotFound(id);
    return row;
  }

  async download(workspaceId: string, id: string): Promise<{ file: FileView; blob: { stream: Readable; size: number } }> {
    const row = await this.row(this.em.fork(), workspaceId, id);
    const blob = await this.blobs.read(row.sha256);
    if (!blob) throw new ApiError(410, 'content_gone', `The bytes of file '${id}' are no longer stored`);
    return { file: fileView(row), blob };
  }

  /** Moves the document (every version of it) to another folder, or to the root. */
  async move(workspaceId: string, id: string, folderId: string | null): Promise<FileView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const row = await this.row(em, workspaceId, id);
        if (folderId) {
          const rows = await em.execute('select 1 from kb_folders where id = ? and workspace_id = ? for share', [folderId, workspaceId]);
          if (!rows.length) throw folderNotFound(folderId);
        }
        await em.execute('update kb_documents set folder_id = ? where id = ?', [folderId, row.document_id]);
        await em.execute('update kb_files set updated_at = now() where id = ?', [id]);
        await em.execute('select pg_notify(?, ?)', [KB_CHANGES_CHANNEL, JSON.stringify({ workspace_id: workspaceId, document_id: row.document_id })]);
        return fileView(await this.row(em, workspaceId, id));
      });
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        throw new ApiError(409, 'file_exists', 'A file with that name already exists in the target folder');
      }
      throw err;
    }
  }

  /** Deletes one version with its passages and bytes; the previous version becomes current. */
  async delete(workspaceId: string, id: string): Promise<void> {
    const sha = await this.em.fork().transactional(async (em) => {
      const row = await this.row(em, workspaceId, id);
      await em.execute('select id from kb_documents where id = ? for update', [row.document_id]);
      await em.execute('delete from kb_files where id = ?', [id]);
      if (row.is_current) {
        const promoted = await em.execute(
          `update kb_files set is_current = true, updated_at = now()
           where id = (select id from kb_files where document_id = ? order by version desc limit 1) returning id`,
          [row.document_id],
        );
        if (!promoted.length) await em.execute('delete from kb_documents where id = ?', [row.document_id]);
      }
      await em.execute('select pg_notify(?, ?)', [KB_CHANGES_CHANNEL, JSON.stringify({ workspace_id: workspaceId, document_id: row.document_id })]);
      return row.sha256;
    });
    await this.releaseBlob(sha);
  }

  /** Removes stored bytes no file refers to any more (the store is shared with widget uploads: same bytes, one blob). */
  private async releaseBlob(sha: string): Promise<void> {
    const refs = await this.em.fork().execute('select 1 from kb_files where sha256 = ? union all select 1 from widget_uploads where blob_key = ? limit 1', [sha, sha]);
    if (!refs.length) await this.blobs.delete(sha);
  }

  async countInFolder(folderId: string): Promise<number> {
    const [{ n }] = await this.em.fork().execute<{ n: string }[]>(
      'select count(*) as n from kb_files f join kb_documents d on d.id = f.document_id where d.folder_id = ? and f.is_current',
      [folderId],
    );
    return Number(n);
  }
}
