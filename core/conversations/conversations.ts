import type { EntityManager } from '@mikro-orm/postgresql';
import { ApiError } from '../errors';
import { decodeCursor, encodeCursor } from '../pagination';

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
    const params: unknown[] = [workspaceId];
    let where = 'workspace_id = ?';
    if (q.cases) where += ' and needs_human';
    if (q.customer_id) {
      where += ' and customer_id = ?';
      params.push(q.customer_id);
    }
    if (q.status) {
      where += ' and status = ?';
      params.push(q.status);
    }
    if (q.cursor) {
      const [at, id] = decodeCursor(q.cursor);
      where += ' and (created_at, id) < (?::timestamptz, ?)';
      params.push(at, id);
    }
    const rows = await this.em.fork().execute<Row[]>(`select * from conversations where ${where} order by created_at desc, id desc limit ?`, [...params, q.limit + 1]);
    const page = rows.slice(0, q.limit);
    return { conversations: page.map(view), next_cursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]) : null };
  }

  async get(workspaceId: string, id: string): Promise<ConversationView> {
    const [row] = await this.em.fork().execute<Row[]>('select * from conversations where id = ? and workspace_id = ?', [id, workspaceId]);
    if (!row) throw new ApiError(404, 'not_found', `No conversation with id '${id}' in this workspace`);
    return view(row);
  }

  /** The timeline, oldest first; `cursor` continues after the last event returned. */
  async events(workspaceId: string, id: string, q: { limit: number; cursor?: string }): Promise<{ events: ConversationEventView[]; next_cursor: string | null }> {
    await this.get(workspaceId, id);
    const params: unknown[] = [id];
    let where = 'conversation_id = ?';
    if (q.cursor) {
      const [at, eventId] = decodeCursor(q.cursor);
      where += ' and (created_at, id) > (?::timestamptz, ?)';
      params.push(at, eventId);
    }
    const rows = await this.em.fork().execute<{ id: string; type: string; data: Record<string, unknown>; created_at: Date }[]>(
      `select id, type, data, created_at from conversation_events where ${where} order by created_at, id limit ?`,
      [...params, q.limit + 1],
    );
    const page = rows.slice(0, q.limit);
    return {
      events: page.map((r) => ({ id: r.id, type: r.type, data: r.data, created_at: iso(r.created_at)! })),
      next_cursor: rows.length > q.limit ? encodeCursor(page[page.length - 1]) : null,
    };
  }
}
