import type { EntityManager } from '@mikro-orm/postgresql';
import { Agent, type IAgent } from '../../db/entities';

/**
 * The one data path to `agents` for the rest of the domain (sends and inbound messages
 * find the agent of a number, turns and the widget read an agent's spec, a folder delete
 * names the agents that select it); AgentService owns the writes. Every method runs on
 * the EntityManager it is given.
 */
export class AgentRepository {
  /** Published agents whose knowledge-base selection names the folder (a folder delete reports them; their selections stay as they are). */
  async publishedAgentsSelectingFolder(em: EntityManager, workspaceId: string, folderId: string): Promise<Array<{ id: string; name: string; status: 'published' }>> {
    // raw SQL: jsonb containment (`@>`) inside the spec has no ORM operator.
    // eslint-disable-next-line no-restricted-syntax
    return em.execute(
      `select id, name, status from agents
       where workspace_id = ? and status = 'published' and spec->'knowledge_base'->'folder_ids' @> ?::jsonb
       order by name, id`,
      [workspaceId, JSON.stringify([folderId])],
    );
  }

  /** The agent with this id in the workspace; null when there is none. */
  findAgent(em: EntityManager, workspaceId: string, id: string): Promise<IAgent | null> {
    return em.findOne(Agent, { id, workspaceId });
  }

  /** The names of these agents of the workspace, by id (ids of no agent there are left out). */
  async agentNames(em: EntityManager, workspaceId: string, ids: string[]): Promise<Map<string, string>> {
    if (!ids.length) return new Map();
    const rows = await em.find(Agent, { workspaceId, id: { $in: ids } }, { fields: ['id', 'name'] });
    return new Map(rows.map((a) => [a.id, a.name]));
  }

  /** Every agent of the workspace (draft or published) whose msgapp trigger names this number, by id. */
  agentsOnNumber(em: EntityManager, workspaceId: string, number: string): Promise<IAgent[]> {
    return em.find(Agent, { workspaceId, spec: { triggers: { msgapp: { number } } } } as never, { orderBy: { id: 'asc' } });
  }

  /**
   * The agent that claims this msgapp phone_number_id, installation-wide: the published agent
   * that can run (no invalid_reasons) naming it — at most one (agents_msgapp_claim_uq).
   * `exceptId`: another agent than this one. Null when none does.
   */
  /** `number`: the display number the agent's msgapp trigger names (what its messages come from and go to). */
  async agentClaimingNumber(em: EntityManager, phoneNumberId: string, exceptId?: string): Promise<{ id: string; workspaceId: string; number: string | null } | null> {
    // raw SQL: the expression and predicate are those of the partial unique index agents_msgapp_claim_uq, so this
    // installation-wide look-up uses it.
    // eslint-disable-next-line no-restricted-syntax
    const [row] = await em.execute<{ id: string; workspace_id: string; number: string | null }[]>(
      `select id, workspace_id, spec #>> '{triggers,msgapp,number}' as number from agents where status = 'published' and cardinality(invalid_reasons) = 0
       and spec #>> '{triggers,msgapp,phone_number_id}' = ?${exceptId !== undefined ? ' and id <> ?' : ''}`,
      exceptId !== undefined ? [phoneNumberId, exceptId] : [phoneNumberId],
    );
    return row ? { id: row.id, workspaceId: row.workspace_id, number: row.number ?? null } : null;
  }
}
