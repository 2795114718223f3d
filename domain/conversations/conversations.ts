import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Conversation, ConversationEvent, type IConversation } from '../../db/entities';
import { ChatFrames } from '../chat/frames';
import { DomainError } from '../errors';
import { keysetFind } from '../../db/pagination';
import type { ConversationRepository } from './repository';

export type { WebConversationRow } from './repository';

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

const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : null);
const view = (r: IConversation): ConversationView => ({
  id: r.id,
  customer_id: r.customerId ?? null,
  agent_id: r.agentId ?? null,
  channel: r.channel,
  status: r.status,
  needs_human: r.needsHuman,
  case_reason: r.caseReason ?? null,
  last_inbound_at: iso(r.lastInboundAt),
  created_at: iso(r.createdAt)!,
  updated_at: iso(r.updatedAt)!,
});

/**
 * Conversations and their timeline. Conversations are opened by the channels (an
 * inbound message, a send, the widget) through ConversationRepository; this service reads
 * them. `cases` are the conversations flagged for a human to follow up. This module
 * alone queries `conversations` and `conversation_events`.
 */
export class ConversationService {
  private readonly frames: ChatFrames;

  constructor(
    private readonly em: EntityManager,
    private readonly rows: ConversationRepository,
  ) {
    this.frames = new ChatFrames(em);
  }

  /**
   * Flags a conversation for a human (`needs_human: true`, with the reason) or resolves
   * its case (`false`): while flagged the agent does not answer it; resolving lets the
   * agent answer the next message. Recorded on the timeline (`handoff` / `case_resolved`).
   */
  async setNeedsHuman(workspaceId: string, id: string, needsHuman: boolean, reason?: string): Promise<ConversationView> {
    const row = await this.em.fork().findOne(Conversation, { id, workspaceId });
    if (!row) throw new DomainError('not_found', `No conversation with id '${id}' in this workspace`);
    if (needsHuman && !row.needsHuman) {
      const why = reason?.trim() || 'flagged by an operator';
      await this.rows.flagForHuman(this.em.fork(), id, why, { reason: why, by: 'operator' });
    } else if (!needsHuman && row.needsHuman) {
      await this.em.fork().transactional(async (tx) => {
        await tx.nativeUpdate(Conversation, { id }, { needsHuman: false, caseReason: null, updatedAt: new Date() });
        await this.rows.addConversationEvent(tx, id, 'case_resolved', { reason: row.caseReason ?? null });
      });
    }
    // The visitor's open widgets learn who answers now (a status line instead of the agent's typing dots).
    if (row.channel === 'web' && needsHuman !== row.needsHuman) await this.frames.publish(id, { type: 'handoff', active: needsHuman });
    return this.get(workspaceId, id);
  }


  async list(
    workspaceId: string,
    q: { customer_id?: string; status?: 'open' | 'closed'; cases?: boolean; limit: number; cursor?: string },
  ): Promise<{ conversations: ConversationView[]; next_cursor: string | null }> {
    // Console test conversations ("Try it") are in no list (docs/console.md).
    const where: FilterQuery<IConversation> = { workspaceId, isTest: false };
    if (q.cases) where.needsHuman = true;
    if (q.customer_id) where.customerId = q.customer_id;
    if (q.status) where.status = q.status;
    const page = await keysetFind(this.em.fork(), Conversation, where, q);
    return { conversations: page.rows.map(view), next_cursor: page.next_cursor };
  }

  async get(workspaceId: string, id: string): Promise<ConversationView> {
    const row = await this.em.fork().findOne(Conversation, { id, workspaceId });
    if (!row) throw new DomainError('not_found', `No conversation with id '${id}' in this workspace`);
    return view(row);
  }

  /** The timeline, oldest first; `cursor` continues after the last event returned. */
  async events(workspaceId: string, id: string, q: { limit: number; cursor?: string }): Promise<{ events: ConversationEventView[]; next_cursor: string | null }> {
    await this.get(workspaceId, id);
    const page = await keysetFind(this.em.fork(), ConversationEvent, { conversationId: id }, q, { direction: 'asc' });
    return { events: page.rows.map((r) => ({ id: r.id, type: r.type, data: r.data, created_at: iso(r.createdAt)! })), next_cursor: page.next_cursor };
  }
}
