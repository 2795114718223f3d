import type { Readable } from 'node:stream';
import { LockMode, type FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { KbDocument, KbFile, type IKbFile } from '../../db/entities';
import { DomainError } from '../errors';
import { keysetFind } from '../../db/pagination';
import { newId } from '../../lib/ids';
import { sniffType } from '../../lib/extract/sniff';
import { KB_CHANGES_CHANNEL, kbChangePayload, type KnowledgeBaseRepository } from './repository';
import type { BlobStore, StagedBlob } from '../ports/blob-store';
import type { BlobRefRepository } from '../storage/blob-refs';

export { KB_CHANGES_CHANNEL };
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

/** A file version with its document's folder (the document says where every version lives). */
type FileWithFolder = { file: IKbFile; folderId: string | null };

export function fileView({ file: f, folderId }: FileWithFolder): FileView {
  return {
    id: f.id,
    name: f.name,
    status: f.status,
    mime_type: f.mimeType,
    file_size: Number(f.fileSize),
    folder_id: folderId ?? null,
    chunk_count: f.chunkCount,
    version: f.version,
    error_message: f.errorMessage ?? null,
    created_at: f.createdAt.toISOString(),
    updated_at: f.updatedAt.toISOString(),
  };
}

const folderNotFound = (id: string) => new DomainError('folder_not_found', `No folder with id '${id}' in this workspace`);
const fileNotFound = (id: string) => new DomainError('not_found', `No file with id '${id}' in this workspace`);

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
    private readonly kb: KnowledgeBaseRepository,
    private readonly blobRefs: Pick<BlobRefRepository, 'releaseBlob'>,
  ) {}

  /**
   * POST /kb/files: an uploaded file checked (not empty; its name 1 to 255 characters as
   * sent, not blank, stored trimmed; a supported type, decided from its bytes: 415
   * unsupported_mime) and recorded as the new current version of its document. Takes
   * ownership of `staged`: committed, or discarded when refused.
   */
  async upload(workspaceId: string, input: { staged: StagedBlob; fileName: string; name?: string; folderId: string | null }): Promise<FileView> {
    const { staged, fileName } = input;
    let pending: StagedBlob | null = staged;
    try {
      if (staged.size === 0) throw new DomainError('invalid_request', 'file: is empty');
      // As the document says: at most 255 characters as sent, not blank; stored trimmed.
      const given = input.name ?? fileName;
      const name = given.trim();
      if (!name || given.length > 255) throw new DomainError('invalid_request', 'name: 1 to 255 characters, not blank');
      const type = await sniffType(staged.tempPath, fileName || name);
      if (!type) throw new DomainError('unsupported_mime', `file: '${fileName || name}' is not a supported document, image, audio or video type`);
      const created = await this.create(workspaceId, { staged, name, folderId: input.folderId, mime: type.mime, kind: type.kind });
      pending = null;
      return created;
    } finally {
      if (pending) await this.blobs.discard(pending);
    }
  }

  /** Records an uploaded (staged, sniffed) file as the new current version of its document. */
  async create(
    workspaceId: string,
    input: { staged: StagedBlob; name: string; folderId: string | null; mime: string; kind: string },
  ): Promise<FileView> {
    if (input.folderId && !(await this.kb.folderInWorkspace(this.em.fork(), workspaceId, input.folderId))) throw folderNotFound(input.folderId);
    const sha = await this.blobs.commit(input.staged);
    try {
      return await this.em.fork().transactional(async (em) => {
        // raw SQL: the conflict target is the expression index (workspace_id, coalesce(folder_id, ''), name), which
        // the ORM's onConflict cannot name; one statement finds or creates the document, whichever upload comes first.
        // eslint-disable-next-line no-restricted-syntax
        const [doc] = await em.execute<{ id: string }[]>(
          `insert into kb_documents (id, workspace_id, folder_id, name) values (?, ?, ?, ?)
           on conflict (workspace_id, coalesce(folder_id, ''), name) do update set name = excluded.name
           returning id`,
          [newId('doc'), workspaceId, input.folderId, input.name],
        );
        // Serialises concurrent uploads of one document: versions stay gap-free and one is current.
        await em.findOne(KbDocument, { id: doc.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, fields: ['id'] });
        const latest = await em.findOne(KbFile, { documentId: doc.id }, { orderBy: { version: 'desc' }, fields: ['version'] });
        const now = new Date();
        await em.nativeUpdate(KbFile, { documentId: doc.id, isCurrent: true }, { isCurrent: false, updatedAt: now });
        const id = newId('file');
        await em.insert(KbFile, {
          id,
          workspaceId,
          documentId: doc.id,
          version: (latest?.version ?? 0) + 1,
          isCurrent: true,
          name: input.name,
          status: 'pending',
          mimeType: input.mime,
          kind: input.kind,
          fileSize: input.staged.size,
          sha256: sha,
          createdAt: now,
          updatedAt: now,
        });
        // raw SQL: pg_notify has no ORM form; both notices are sent at commit (the indexing outbox, the dense indexes).
        // eslint-disable-next-line no-restricted-syntax
        await em.execute('select pg_notify(?, ?), pg_notify(?, ?)', [KB_INDEX_OUTBOX_CHANNEL, id, KB_CHANGES_CHANNEL, kbChangePayload(workspaceId, { document_id: doc.id })]);
        return fileView(await this.row(em, workspaceId, id));
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
    const em = this.em.fork();
    const inFolder = em.createQueryBuilder(KbDocument).select('id').where({ workspaceId, folderId: q.folderId });
    // The folder is the document's: the current versions of the documents in it (a sub-select, one statement).
    const where: FilterQuery<IKbFile>[] = [{ workspaceId, isCurrent: true, documentId: { $in: inFolder.getKnexQuery() as never } }];
    if (q.status) where.push({ status: q.status });
    const page = await keysetFind(em, KbFile, { $and: where }, q);
    return { files: page.rows.map((file) => ({ file, folderId: q.folderId })).map(fileView), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<FileView> {
    return fileView(await this.row(this.em.fork(), workspaceId, id));
  }

  private async row(em: EntityManager, workspaceId: string, id: string): Promise<FileWithFolder> {
    const file = await em.findOne(KbFile, { id, workspaceId }, { refresh: true });
    if (!file) throw fileNotFound(id);
    const doc = await em.findOne(KbDocument, { id: file.documentId }, { fields: ['folderId'], refresh: true });
    return { file, folderId: doc?.folderId ?? null };
  }

  async download(workspaceId: string, id: string): Promise<{ file: FileView; blob: { stream: Readable; size: number } }> {
    const row = await this.row(this.em.fork(), workspaceId, id);
    const blob = await this.blobs.read(row.file.sha256);
    if (!blob) throw new DomainError('content_gone', `The bytes of file '${id}' are no longer stored`);
    return { file: fileView(row), blob };
  }

  /** Moves the document (every version of it) to another folder, or to the root. */
  async move(workspaceId: string, id: string, folderId: string | null): Promise<FileView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const { file } = await this.row(em, workspaceId, id);
        // Share-locked: the folder cannot be deleted while the document moves into it.
        if (folderId && !(await this.kb.folderInWorkspace(em, workspaceId, folderId, { lock: true }))) throw folderNotFound(folderId);
        await em.nativeUpdate(KbDocument, { id: file.documentId }, { folderId });
        await em.nativeUpdate(KbFile, { id }, { updatedAt: new Date() });
        await this.kb.notifyKbChange(em, workspaceId, { document_id: file.documentId });
        return fileView(await this.row(em, workspaceId, id));
      });
    } catch (err) {
      if ((err as { code?: string }).code === '23505') {
        throw new DomainError('file_exists', 'A file with that name already exists in the target folder');
      }
      throw err;
    }
  }

  /** Deletes one version with its passages and bytes; the previous version becomes current. */
  async delete(workspaceId: string, id: string): Promise<void> {
    const sha = await this.em.fork().transactional(async (em) => {
      const { file } = await this.row(em, workspaceId, id);
      await em.findOne(KbDocument, { id: file.documentId }, { lockMode: LockMode.PESSIMISTIC_WRITE, fields: ['id'] });
      await em.nativeDelete(KbFile, { id });
      if (file.isCurrent) {
        const previous = await em.findOne(KbFile, { documentId: file.documentId }, { orderBy: { version: 'desc' }, fields: ['id'] });
        if (previous) await em.nativeUpdate(KbFile, { id: previous.id }, { isCurrent: true, updatedAt: new Date() });
        else await em.nativeDelete(KbDocument, { id: file.documentId });
      }
      await this.kb.notifyKbChange(em, workspaceId, { document_id: file.documentId });
      return file.sha256;
    });
    await this.releaseBlob(sha);
  }

  /** Removes the stored bytes unless another owner of any kind, in any workspace, still refers to them (domain/storage/blob-refs.ts). */
  private async releaseBlob(sha: string): Promise<void> {
    await this.blobRefs.releaseBlob(this.em, this.blobs, sha);
  }
}
