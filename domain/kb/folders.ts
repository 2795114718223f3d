import type { EntityManager } from '@mikro-orm/postgresql';
import type { AgentRepository } from '../agents/repository';
import { KbFolder, type IKbFolder } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import type { KnowledgeBaseRepository } from './repository';

export interface FolderView {
  id: string;
  name: string;
  parent_id: string | null;
  path: string;
  created_at: string;
  updated_at: string;
}

export interface AffectedAgent {
  id: string;
  name: string;
  status: 'published';
}

const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

export function folderView(f: IKbFolder): FolderView {
  return {
    id: f.id,
    name: f.name,
    parent_id: f.parentId ?? null,
    path: f.path,
    created_at: f.createdAt.toISOString(),
    updated_at: f.updatedAt.toISOString(),
  };
}

const childPath = (parentPath: string | null, name: string) => `${parentPath ?? ''}/${name}`;

const folderExists = (name: string) =>
  new DomainError('folder_exists', `A folder named '${name}' already exists in that parent folder`);

function pgCode(err: unknown): string | undefined {
  return (err as { code?: string }).code;
}

/**
 * Knowledge-base folders: a tree per workspace whose `path` is kept materialised
 * (`/Parent/Child`). Sibling names are unique (enforced by a unique index, so two
 * concurrent creates cannot both win); a delete never cascades.
 */
export class FolderService {
  constructor(
    private readonly em: EntityManager,
    private readonly kb: Pick<KnowledgeBaseRepository, 'documentsInFolder'>,
    private readonly agents: Pick<AgentRepository, 'publishedAgentsSelectingFolder'>,
  ) {}

  async list(workspaceId: string, parentId: string | null): Promise<FolderView[]> {
    const em = this.em.fork();
    if (parentId !== null) await this.require(em, workspaceId, parentId);
    // Sorted by name in code-point order, the same for every database collation.
    const rows = await em.find(KbFolder, { workspaceId, parentId }, { orderBy: { name: 'asc', id: 'asc' } });
    return rows
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.id < b.id ? -1 : 1))
      .map(folderView);
  }

  async get(workspaceId: string, id: string): Promise<FolderView> {
    return folderView(await this.require(this.em.fork(), workspaceId, id));
  }

  async create(workspaceId: string, name: string, parentId: string | null): Promise<FolderView> {
    const em = this.em.fork();
    let parentPath: string | null = null;
    if (parentId !== null) {
      const parent = await em.findOne(KbFolder, { id: parentId, workspaceId });
      if (!parent) throw new DomainError('parent_not_found', `No folder with id '${parentId}' to create the folder in`);
      parentPath = parent.path;
    }
    const row = em.create(KbFolder, { id: newId('fld'), workspaceId, parentId, name, path: childPath(parentPath, name) });
    try {
      await em.flush();
    } catch (err) {
      if (pgCode(err) === UNIQUE_VIOLATION) throw folderExists(name);
      // The parent was deleted between our read and our insert.
      if (pgCode(err) === FOREIGN_KEY_VIOLATION) {
        throw new DomainError('parent_not_found', `No folder with id '${parentId}' to create the folder in`);
      }
      throw err;
    }
    return folderView(row);
  }

  /** Only the name changes; the paths of every descendant follow in the same transaction. */
  async rename(workspaceId: string, id: string, name: string): Promise<FolderView> {
    try {
      return await this.em.fork().transactional(async (em) => {
        const folder = await em.findOne(KbFolder, { id, workspaceId }, { lockMode: 4 /* pessimistic write */ });
        if (!folder) throw new DomainError('not_found', `No folder with id '${id}' in this workspace`);
        if (folder.name === name) return folderView(folder);
        const oldPath = folder.path;
        const parentPath = oldPath.slice(0, oldPath.length - folder.name.length - 1);
        const newPath = `${parentPath}/${name}`;
        folder.name = name;
        folder.path = newPath;
        await em.flush();
        // Descendants found through parent_id (not by path prefix, which a name holding
        // '/' would make ambiguous); their path keeps everything after the old prefix.
        // raw SQL: a recursive CTE over the tree, so every descendant moves in one statement.
        // eslint-disable-next-line no-restricted-syntax
        await em.execute(
          `with recursive sub as (
             select id from kb_folders where parent_id = ?
             union all
             select f.id from kb_folders f join sub on f.parent_id = sub.id
           )
           update kb_folders set path = ? || substr(path, ?), updated_at = now()
           where id in (select id from sub)`,
          [id, newPath, oldPath.length + 1],
        );
        return folderView(folder);
      });
    } catch (err) {
      if (pgCode(err) === UNIQUE_VIOLATION) throw folderExists(name);
      throw err;
    }
  }

  /**
   * Deletes an empty folder. The folder row is locked first, so a concurrent subfolder
   * insert (which must take a key-share lock on its parent) waits for the delete and then
   * fails on the foreign key, or the delete sees the subfolder and refuses.
   */
  async delete(workspaceId: string, id: string): Promise<{ success: true; affected_agents: AffectedAgent[] }> {
    return this.em.fork().transactional(async (em) => {
      // raw SQL: a plain row lock; the ORM's locked findOne, racing a subfolder insert that holds a
      // key-share lock on this row, was seen to come back empty about once in 150 races.
      // eslint-disable-next-line no-restricted-syntax
      const [folder] = await em.execute<{ id: string; name: string }[]>('select id, name from kb_folders where id = ? and workspace_id = ? for update', [id, workspaceId]);
      if (!folder) throw new DomainError('not_found', `No folder with id '${id}' in this workspace`);
      const subfolders = await em.count(KbFolder, { parentId: id });
      const files = await this.kb.documentsInFolder(em, id);
      if (files > 0 || subfolders > 0) {
        throw new DomainError('folder_not_empty', `Folder '${folder.name}' holds ${files} file(s) and ${subfolders} subfolder(s); delete or move them first`, {
          files,
          subfolders,
        });
      }
      await em.nativeDelete(KbFolder, { id });
      return { success: true as const, affected_agents: await this.agents.publishedAgentsSelectingFolder(em, workspaceId, id) };
    });
  }

  private async require(em: EntityManager, workspaceId: string, id: string): Promise<IKbFolder> {
    const folder = await em.findOne(KbFolder, { id, workspaceId });
    if (!folder) throw new DomainError('not_found', `No folder with id '${id}' in this workspace`);
    return folder;
  }

  /** Which of these folder ids exist in the workspace (an agent's knowledge-base selection is checked against them). */
  async existing(workspaceId: string, ids: readonly string[], em: EntityManager = this.em.fork()): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const rows = await em.find(KbFolder, { workspaceId, id: { $in: [...ids] } }, { fields: ['id'] });
    return new Set(rows.map((r) => r.id));
  }
}
