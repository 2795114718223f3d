import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { KbDocument, KbFile, KbFolder } from '../../db/entities';

/** Where every change that alters what search may return is announced (the dense indexes listen). */
export const KB_CHANGES_CHANNEL = 'concierge_kb_changes';

/** A knowledge-base change notice: the workspace and the document or file whose passages changed (the dense indexes replace only those rows). */
export function kbChangePayload(workspaceId: string, changed: { document_id: string } | { file_id: string }): string {
  return JSON.stringify({ workspace_id: workspaceId, ...changed });
}

/**
 * The one data path to the knowledge base's tables (`kb_folders`, `kb_documents`,
 * `kb_files`) for the rest of the domain: agents check their selections, search and
 * agent turns read files, a folder delete counts documents. FileService and
 * FolderService own the writes; both reach each other's rows only through here, so
 * neither module imports the other (nor agents) at run time. Every method runs on the
 * EntityManager it is given (the caller's transaction, when it is one).
 */
export class KnowledgeBaseRepository {
  /**
   * Whether the folder exists in the workspace. `lock`: share-locked until the transaction
   * ends, so a folder delete (which locks the row for update) waits and then sees what was
   * put into the folder.
   */
  async folderInWorkspace(em: EntityManager, workspaceId: string, id: string, opts: { lock?: boolean } = {}): Promise<boolean> {
    const row = await em.findOne(KbFolder, { id, workspaceId }, { fields: ['id'], ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_READ } : {}) });
    return row !== null;
  }

  /**
   * These folders of the workspace (ids of other workspaces or of no folder are left out)
   * and every folder below them.
   */
  async folderSubtree(em: EntityManager, workspaceId: string, rootIds: readonly string[]): Promise<Set<string>> {
    if (!rootIds.length) return new Set();
    // raw SQL: a recursive CTE over the tree, so the whole subtree comes back in one statement.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<{ id: string }[]>(
      `with recursive sub as (
         select id from kb_folders where workspace_id = ? and id in (${rootIds.map(() => '?').join(', ')})
         union all
         select f.id from kb_folders f join sub on f.parent_id = sub.id)
       select id from sub`,
      [workspaceId, ...rootIds],
    );
    return new Set(rows.map((r) => r.id));
  }

  /** Every change that alters what search may return wakes the dense indexes of every process at commit. */
  async notifyKbChange(em: EntityManager, workspaceId: string, changed: { document_id: string } | { file_id: string }): Promise<void> {
    // raw SQL: pg_notify has no ORM form; in the caller's transaction it is sent at its commit.
    // eslint-disable-next-line no-restricted-syntax
    await em.execute('select pg_notify(?, ?)', [KB_CHANGES_CHANNEL, kbChangePayload(workspaceId, changed)]);
  }

  /** Documents in the folder (each holds its current version): what a folder delete refuses to orphan. */
  documentsInFolder(em: EntityManager, folderId: string): Promise<number> {
    return em.count(KbDocument, { folderId });
  }

  /** Which of these file ids exist in the workspace (an agent's knowledge-base selection is checked against them). */
  async existingFiles(em: EntityManager, workspaceId: string, ids: readonly string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows = await em.find(KbFile, { workspaceId, id: { $in: [...ids] } }, { fields: ['id'] });
    return new Set(rows.map((r) => r.id));
  }

  /** Whether the workspace has a current, active (indexed) file: what a search could find (one query on kb_files_list_idx). */
  async hasSearchableFiles(em: EntityManager, workspaceId: string): Promise<boolean> {
    return (await em.findOne(KbFile, { workspaceId, isCurrent: true, status: 'active' }, { fields: ['id'] })) !== null;
  }

  /** Which of these file versions are current and active, with their name and their document's folder. */
  async currentActiveFiles(em: EntityManager, ids: readonly string[]): Promise<Map<string, { name: string; folderId: string | null }>> {
    const out = new Map<string, { name: string; folderId: string | null }>();
    if (!ids.length) return out;
    const files = await em.find(KbFile, { id: { $in: [...ids] }, isCurrent: true, status: 'active' }, { fields: ['id', 'name', 'documentId'] });
    if (!files.length) return out;
    const docs = await em.find(KbDocument, { id: { $in: [...new Set(files.map((f) => f.documentId))] } }, { fields: ['id', 'folderId'] });
    const folderOf = new Map(docs.map((d) => [d.id, d.folderId ?? null]));
    for (const f of files) if (folderOf.has(f.documentId)) out.set(f.id, { name: f.name, folderId: folderOf.get(f.documentId)! });
    return out;
  }

  /** The titles recorded at indexing of these file versions of the workspace; files with none are left out. */
  async kbFileTitles(em: EntityManager, workspaceId: string, ids: readonly string[]): Promise<Map<string, string>> {
    if (!ids.length) return new Map();
    const rows = await em.find(KbFile, { workspaceId, id: { $in: [...new Set(ids)] }, title: { $ne: null } }, { fields: ['id', 'title'] });
    return new Map(rows.map((r) => [r.id, r.title!]));
  }

  /**
   * These file versions' bytes and names, whatever their state (a stored message's attachments name them:
   * the ones deleted since are left out).
   */
  async filesById(em: EntityManager, ids: readonly string[]): Promise<Map<string, { id: string; sha256: string; mimeType: string; name: string }>> {
    if (!ids.length) return new Map();
    const rows = await em.find(KbFile, { id: { $in: [...ids] } }, { fields: ['id', 'sha256', 'mimeType', 'name'] });
    return new Map(rows.map((f) => [f.id, { id: f.id, sha256: f.sha256, mimeType: f.mimeType, name: f.name }]));
  }

  /** A blob owner kind (BlobRefRepository): how many file versions hold these bytes. */
  filesOfBlob(em: EntityManager, sha256: string): Promise<number> {
    return em.count(KbFile, { sha256 });
  }

  /**
   * The file versions waiting for or in indexing, for the operator's gauges (app/metrics-backlog.ts), and when the
   * oldest of them was created. Each read on its own fork, all at once; a partial index answers them.
   */
  async indexingBacklog(em: EntityManager): Promise<{ pending: number; processing: number; oldestAt: Date | null }> {
    const [pending, processing, oldest] = await Promise.all([
      em.fork().count(KbFile, { status: 'pending' }),
      em.fork().count(KbFile, { status: 'processing' }),
      em.fork().findOne(KbFile, { status: { $in: ['pending', 'processing'] } }, { orderBy: { createdAt: 'asc' }, fields: ['createdAt'] }),
    ]);
    return { pending, processing, oldestAt: oldest?.createdAt ?? null };
  }

  /** Versions not yet handed to an indexing workflow; `name` labels the workflow in the Temporal UI. */
  async filesToIndex(em: EntityManager, limit: number): Promise<Array<{ id: string; workspace_id: string; name: string }>> {
    const rows = await em.find(KbFile, { indexDispatchedAt: null }, { fields: ['id', 'workspaceId', 'name'], orderBy: { createdAt: 'asc', id: 'asc' }, limit });
    return rows.map((r) => ({ id: r.id, workspace_id: r.workspaceId, name: r.name }));
  }

  async markIndexDispatched(em: EntityManager, fileId: string | string[]): Promise<void> {
    const ids = typeof fileId === 'string' ? [fileId] : fileId;
    if (!ids.length) return;
    await em.nativeUpdate(KbFile, { id: ids.length === 1 ? ids[0] : { $in: ids } }, { indexDispatchedAt: new Date() });
  }

  /**
   * A file version an agent with this knowledge-base selection may show: an active file it
   * selects by id, or the current active version of a file under one of its folders (or
   * their subfolders). Null otherwise.
   */
  async downloadableKbFile(
    em: EntityManager,
    workspaceId: string,
    fileId: string,
    selection: { folder_ids: readonly string[]; file_ids: readonly string[] },
  ): Promise<{ sha256: string; mime_type: string; name: string } | null> {
    const file = await em.findOne(KbFile, { id: fileId, workspaceId, status: 'active' }, { fields: ['sha256', 'mimeType', 'name', 'isCurrent', 'documentId'] });
    if (!file) return null;
    let shown = selection.file_ids.includes(file.id);
    if (!shown && file.isCurrent && selection.folder_ids.length) {
      const doc = await em.findOne(KbDocument, { id: file.documentId }, { fields: ['folderId'] });
      shown = !!doc?.folderId && (await this.folderSubtree(em, workspaceId, selection.folder_ids)).has(doc.folderId);
    }
    return shown ? { sha256: file.sha256, mime_type: file.mimeType, name: file.name } : null;
  }
}
