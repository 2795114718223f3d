import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../errors';
import { Filters, keysetPage } from '../pagination';

export interface ConversationView {
  id: string;
  customer_id: string | null;
  agent_id: string | null;
  channel: 'msgapp' | 'web' | 'voice';
  status: 'open' | 'closed';
  needs_human: boolean;
  case_reason: string | null;
  last_inbound_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface ConversationEventView {
  id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: string;
}

interface Row {
  id: string;
  customer_id: string | null;
  agent_id: string | null;
  channel: ConversationView['channel'];
  status: ConversationView['status'];
  needs_human: boolean;
  case_reason: string | null;
  last_inbound_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const view = (r: Row): ConversationView => ({
  id: r.id,
  customer_id: r.customer_id,
  agent_id: r.agent_id,
  channel: r.channel,
  status: r.status,
  needs_human: r.needs_human,
  case_reason: r.case_reason,
  last_inbound_at: iso(r.last_inbound_at),
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
});

/**
 * Conversations and their timeline. Conversations are opened by the channels (an
 * inbound message, a send, the widget); this service reads them. `cases` are the
 * conversations flagged for a human to follow up.
 */
export class ConversationService {
  constructor(private readonly em: EntityManager) {}

  async list(
    workspaceId: string,
    q: { customer_id?: string; status?: 'open' | 'closed'; cases?: boolean; limit: number; cursor?: string },
  ): Promise<{ conversations: ConversationView[]; next_cursor: string | null }> {
    const filters = new Filters('workspace_id = ?', workspaceId);
    if (q.cases) filters.add('needs_human');
    if (q.customer_id) filters.add('customer_id = ?', q.customer_id);
    if (q.status) filters.add('status = ?', q.status);
    const page = await keysetPage<Row>(this.em.fork(), 'select * from conversations', filters, q);
    return { conversations: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<ConversationView> {
    const [row] = await this.em.fork().execute<Row[]>('select * from conversations where id = ? and workspace_id = ?', [id, workspaceId]);
    if (!row) throw new ApiError(404, 'not_found', `No conversation with id '${id}' in this workspace`);
    return view(row);
  }

  /** The timeline, oldest first; `cursor` continues after the last event returned. */
  async events(workspaceId: string, id: string, q: { limit: number; cursor?: string }): Promise<{ events: ConversationEventView[]; next_cursor: string | null }> {
    await this.get(workspaceId, id);
    const page = await keysetPage<{ id: string; type: string; data: Record<string, unknown>; created_at: Date }>(
      this.em.fork(),
      'select id, type, data, created_at from conversation_events',
      new Filters('conversation_id = ?', id),
      q,
      { direction: 'asc' },
    );
    return { events: page.rows.map((r) => ({ id: r.id, type: r.type, data: r.data, created_at: iso(r.created_at)! })), next_cursor: page.next_cursor };
  }
}
