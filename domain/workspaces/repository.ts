import type { EntityManager } from '@mikro-orm/postgresql';
import { Workspace } from '../../db/entities';
import { newId } from '../../lib/ids';

/** A workspace as the admin CLI lists it. */
export interface WorkspaceRow {
  id: string;
  name: string;
  created_at: string;
}

/**
 * The one data path to `workspaces`: the admin CLI creates and lists them, the services
 * that add rows to a workspace (keys, credentials, tickets) check that it exists, and
 * DialOutPolicyRepository reads and sets its dial-out columns. Every method runs on the
 * EntityManager it is given (the caller's transaction, when it is one).
 */
export class WorkspaceRepository {
  async workspaceExists(em: EntityManager, id: string): Promise<boolean> {
    return (await em.count(Workspace, { id })) > 0;
  }

  /** The workspace's id and name; null when there is none. */
  async findWorkspace(em: EntityManager, id: string): Promise<{ id: string; name: string } | null> {
    const ws = await em.findOne(Workspace, { id }, { fields: ['id', 'name'] });
    return ws ? { id: ws.id, name: ws.name } : null;
  }

  async createWorkspace(em: EntityManager, name: string): Promise<{ id: string; name: string }> {
    const id = newId('ws');
    await em.insert(Workspace, { id, name });
    return { id, name };
  }

  /** Every workspace, oldest first. */
  async listWorkspaces(em: EntityManager): Promise<WorkspaceRow[]> {
    const rows = await em.find(Workspace, {}, { orderBy: { createdAt: 'asc' } });
    return rows.map((w) => ({ id: w.id, name: w.name, created_at: w.createdAt.toISOString() }));
  }

  /** The workspace's dial-out columns as stored (null: not set); null when there is no such workspace. */
  async dialOutColumns(em: EntityManager, id: string): Promise<{ countries: string[] | null; types: string[] | null } | null> {
    const ws = await em.findOne(Workspace, { id }, { fields: ['dialOutCountries', 'dialOutNumberTypes'] });
    return ws ? { countries: ws.dialOutCountries ?? null, types: ws.dialOutNumberTypes ?? null } : null;
  }

  /** Sets the dial-out columns given (undefined: left as they are). */
  async setDialOutColumns(em: EntityManager, id: string, cols: { countries?: string[] | null; types?: string[] | null }): Promise<void> {
    const set = { ...(cols.countries !== undefined ? { dialOutCountries: cols.countries } : {}), ...(cols.types !== undefined ? { dialOutNumberTypes: cols.types } : {}) };
    if (Object.keys(set).length) await em.nativeUpdate(Workspace, { id }, set);
  }
}
