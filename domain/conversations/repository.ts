import { LockMode, type FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Conversation, ConversationEvent, type IConversation } from '../../db/entities';
import { newId } from '../../lib/ids';

/** A web conversation as the widget sees it. */
export interface WebConversationRow {
  id: string;
  customer_id: string;
  status: 'open' | 'closed';
  /** The external id of the verified visitor who started it; null when started unverified. */
  verified_external_id: string | null;
  /** A human has it: the agent does not answer. */
  needs_human: boolean;
}

const webRow = (c: IConversation): WebConversationRow => ({
  id: c.id,
  customer_id: c.customerId!,
  status: c.status,
  verified_external_id: c.verifiedExternalId ?? null,
  needs_human: c.needsHuman,
});

/**
 * The one data path to `conversations` and `conversation_events` for the channels (an
 * inbound message, a send, the widget, a call, an agent turn): they open, touch, flag and
 * close conversations through it. Each method runs on the EntityManager it is given, so
 * it joins the caller's transaction.
 */
export class ConversationRepository {
  /** A tool call this reply already made with these arguments (its `mcp.tool_call` event), if any. */
  async recordedToolCall(em: EntityManager, conversationId: string, replyId: string, tool: string, args: Record<string, unknown>): Promise<{ ok: boolean; output: string } | null> {
    const rows = await em.find(ConversationEvent, { conversationId, type: 'mcp.tool_call' }, { orderBy: { createdAt: 'asc' } });
    const same = rows.find((r) => r.data.reply_id === replyId && !r.data.refused && r.data.tool === tool && JSON.stringify(r.data.arguments) === JSON.stringify(args));
    return same ? { ok: Boolean(same.data.ok), output: String(same.data.output ?? '') } : null;
  }

  /** One entry of a conversation's timeline, in the caller's transaction. */
  async addConversationEvent(em: EntityManager, conversationId: string, type: string, data: Record<string, unknown>): Promise<void> {
    await this.addConversationEvents(em, [{ conversationId, type, data }]);
  }

  /**
   * Several timeline entries in one statement (the msgapp webhook's batch of statuses). The timeline is read in
   * created_at order (milliseconds, then the random id): a conversation's entries of one batch are a millisecond
   * apart on the database's clock, so they keep the order given.
   */
  async addConversationEvents(em: EntityManager, events: Array<{ conversationId: string; type: string; data: Record<string, unknown> }>): Promise<void> {
    if (events.length <= 1) {
      for (const e of events) await em.insert(ConversationEvent, { id: newId('evt'), conversationId: e.conversationId, type: e.type, data: e.data });
      return;
    }
    const nth = new Map<string, number>();
    const rows = events.map((e) => {
      const k = nth.get(e.conversationId) ?? 0;
      nth.set(e.conversationId, k + 1);
      return { id: newId('evt'), conversation_id: e.conversationId, type: e.type, data: e.data, k };
    });
    // raw SQL: many rows from one JSON document, each its own offset on the database's clock; the ORM's insertMany takes one default for all.
    // eslint-disable-next-line no-restricted-syntax
    await em.execute(
      `insert into conversation_events (id, conversation_id, type, data, created_at)
       select id, conversation_id, type, data, clock_timestamp() + k * interval '1 millisecond' from jsonb_to_recordset(?::jsonb) as e (id text, conversation_id text, type text, data jsonb, k int)`,
      [JSON.stringify(rows)],
    );
  }

  /**
   * The newest open msgapp conversation of this customer with this agent, locked so two
   * sends share it, or a new one. In the caller's transaction. `inbound`: a customer's
   * message opens it (a new one starts with last_inbound_at set).
   */
  async openMsgappConversation(
    em: EntityManager,
    c: { workspaceId: string; customerId: string; agentId: string },
    opts: { inbound?: boolean } = {},
  ): Promise<string> {
    return (await this.openMsgappConversations(em, c, [c.customerId], opts)).get(c.customerId)!;
  }

  /**
   * `openMsgappConversation` for several customers of one agent at once (the msgapp webhook's batch): one select
   * locking the open ones, one insert of those to open.
   */
  async openMsgappConversations(
    em: EntityManager,
    c: { workspaceId: string; agentId: string },
    customerIds: string[],
    opts: { inbound?: boolean } = {},
  ): Promise<Map<string, string>> {
    const ids = [...new Set(customerIds)];
    const found = new Map<string, string>();
    if (!ids.length) return found;
    const open = await em.find(
      Conversation,
      { workspaceId: c.workspaceId, customerId: ids.length === 1 ? ids[0] : { $in: ids }, agentId: c.agentId, channel: 'msgapp', status: 'open' },
      { orderBy: { createdAt: 'desc', id: 'asc' }, lockMode: LockMode.PESSIMISTIC_WRITE, fields: ['id', 'customerId'] },
    );
    // Newest first: a customer's first row is its newest open conversation.
    for (const row of open) if (row.customerId && !found.has(row.customerId)) found.set(row.customerId, row.id);
    const created = ids
      .filter((customerId) => !found.has(customerId))
      .map((customerId) => ({
        id: newId('conv'),
        workspaceId: c.workspaceId,
        customerId,
        agentId: c.agentId,
        channel: 'msgapp' as const,
        status: 'open' as const,
        ...(opts.inbound ? { lastInboundAt: new Date() } : {}),
      }));
    if (created.length) await em.createQueryBuilder(Conversation).insert(created);
    for (const row of created) found.set(row.customerId, row.id);
    return found;
  }

  /**
   * A customer's message arrived: the 24-hour window opens again from now (one conversation or several). `titles`:
   * the conversations' titles where they have none yet (as `touchConversation` gives them), in the same statement.
   */
  async markInboundReceived(em: EntityManager, id: string | string[], titles: Map<string, string | null> = new Map()): Promise<void> {
    const ids = typeof id === 'string' ? [id] : [...new Set(id)];
    if (!ids.length) return;
    const now = new Date();
    if (![...titles.values()].some(Boolean)) {
      await em.nativeUpdate(Conversation, { id: ids.length === 1 ? ids[0] : { $in: ids } }, { lastInboundAt: now, updatedAt: now });
      return;
    }
    // raw SQL: each row its own title where it has none (one JSON document); the ORM sends one update per row.
    // eslint-disable-next-line no-restricted-syntax
    await em.execute(
      `update conversations as c set last_inbound_at = ?, updated_at = ?, title = coalesce(c.title, t.title)
       from jsonb_to_recordset(?::jsonb) as t (id text, title text) where c.id = t.id`,
      [now, now, JSON.stringify(ids.map((i) => ({ id: i, title: titles.get(i) ?? null })))],
    );
  }

  /** A merged customer's conversations follow it to the customer it was merged into. */
  async moveCustomerConversations(em: EntityManager, fromCustomerId: string, toCustomerId: string): Promise<void> {
    await em.nativeUpdate(Conversation, { customerId: fromCustomerId }, { customerId: toCustomerId, updatedAt: new Date() });
  }

  /** The agent a conversation is with (null: none, or no such conversation), its channel, (web) its site, and whether it is a console test. */
  async conversationAgent(em: EntityManager, id: string): Promise<{ agentId: string | null; channel: IConversation['channel']; siteId: string | null; isTest: boolean } | null> {
    const row = await em.findOne(Conversation, { id }, { fields: ['agentId', 'channel', 'siteId', 'isTest'] });
    return row ? { agentId: row.agentId ?? null, channel: row.channel, siteId: row.siteId ?? null, isTest: row.isTest } : null;
  }

  /**
   * A new console test conversation with the agent ("Try it"): web, with no site and no customer, `is_test` set at
   * insert (the analytics triggers read it then). Its id.
   */
  async insertTestConversation(em: EntityManager, c: { workspaceId: string; agentId: string }): Promise<string> {
    const id = newId('conv');
    await em.insert(Conversation, { id, workspaceId: c.workspaceId, agentId: c.agentId, channel: 'web', status: 'open', isTest: true });
    return id;
  }

  /** A test conversation of the workspace with this agent (null: none, or not a test one). */
  async testConversation(em: EntityManager, workspaceId: string, agentId: string, id: string): Promise<Pick<IConversation, 'id' | 'status'> | null> {
    return em.findOne(Conversation, { id, workspaceId, agentId, isTest: true }, { fields: ['id', 'status'] });
  }

  /** The timeline events of one reply of a conversation, oldest first (what a turn recorded: tool calls, stubs). */
  async replyEvents(em: EntityManager, conversationId: string, replyId: string): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
    const rows = await em.find(ConversationEvent, { conversationId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
    return rows.filter((r) => r.data.reply_id === replyId).map((r) => ({ type: r.type, data: r.data }));
  }

  /** A new message in the transcript: the conversation is touched, and a visitor's first words become its title. */
  async touchConversation(em: EntityManager, id: string, title: string | null): Promise<void> {
    await this.touchConversations(em, [{ id, title }]);
  }

  /** `touchConversation` for several conversations (the msgapp webhook's batch), in one statement. */
  async touchConversations(em: EntityManager, items: Array<{ id: string; title: string | null }>): Promise<void> {
    if (!items.length) return;
    // raw SQL: each row its own title, only where it has none, with the touch (one JSON document); the ORM sends two
    // updates per row (a widget send and a voice turn wait on it).
    // eslint-disable-next-line no-restricted-syntax
    await em.execute(
      `update conversations as c set updated_at = ?, title = coalesce(c.title, t.title) from jsonb_to_recordset(?::jsonb) as t (id text, title text) where c.id = t.id`,
      [new Date(), JSON.stringify(items.map((t) => ({ id: t.id, title: t.title })))],
    );
  }

  /** Flags the conversation for a human (a case) and records why on its timeline, in one transaction. */
  async flagForHuman(em: EntityManager, id: string, reason: string, data: Record<string, unknown>): Promise<void> {
    await em.transactional(async (tx) => {
      await tx.nativeUpdate(Conversation, { id }, { needsHuman: true, caseReason: reason, updatedAt: new Date() });
      await this.addConversationEvent(tx, id, 'handoff', data);
    });
  }

  /** A conversation of the workspace, as a writer into its transcript needs it (null: none with that id there). */
  async conversationInWorkspace(em: EntityManager, workspaceId: string, id: string): Promise<Pick<IConversation, 'id' | 'channel' | 'status'> | null> {
    return em.findOne(Conversation, { id, workspaceId }, { fields: ['id', 'channel', 'status'] });
  }

  /** Whether a human has the conversation (its case is open): the agent does not answer then. */
  async conversationNeedsHuman(em: EntityManager, id: string): Promise<boolean> {
    const row = await em.findOne(Conversation, { id }, { fields: ['needsHuman'] });
    return Boolean(row?.needsHuman);
  }

  /**
   * A web conversation of this very site (not another site's of the same workspace and
   * agent), or null. `open`: only an open one; `lock`: locked for update until the
   * transaction ends.
   */
  async webConversationOnSite(em: EntityManager, siteId: string, id: string, opts: { open?: boolean; lock?: boolean } = {}): Promise<WebConversationRow | null> {
    const where: FilterQuery<IConversation> = { id, siteId, channel: 'web' };
    if (opts.open) where.status = 'open';
    const row = await em.findOne(Conversation, where, { refresh: true, ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) });
    return row ? webRow(row) : null;
  }

  /** The open web conversations a verified visitor started on this site, newest first (`lock`: for update). */
  async verifiedOpenWebConversations(
    em: EntityManager,
    siteId: string,
    verifiedExternalId: string,
    opts: { lock?: boolean; limit?: number } = {},
  ): Promise<WebConversationRow[]> {
    const rows = await em.find(
      Conversation,
      { siteId, channel: 'web', status: 'open', verifiedExternalId },
      { orderBy: { createdAt: 'desc', id: 'desc' }, refresh: true, ...(opts.limit ? { limit: opts.limit } : {}), ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) },
    );
    return rows.map(webRow);
  }

  /** Closes these conversations now. */
  async closeConversations(em: EntityManager, ids: string[]): Promise<void> {
    if (ids.length) await em.nativeUpdate(Conversation, { id: { $in: ids } }, { status: 'closed', closedAt: new Date() });
  }

  /** A new open web conversation of the site; `verifiedExternalId` when a verified visitor starts it. */
  async insertWebConversation(
    em: EntityManager,
    c: { id: string; workspaceId: string; siteId: string; agentId: string; customerId: string; verifiedExternalId: string | null },
  ): Promise<void> {
    await em.insert(Conversation, {
      id: c.id,
      workspaceId: c.workspaceId,
      customerId: c.customerId,
      agentId: c.agentId,
      siteId: c.siteId,
      channel: 'web',
      status: 'open',
      verifiedExternalId: c.verifiedExternalId,
    });
  }

  /** A new open voice conversation (a dial-out call placed through the API); its id. In the caller's transaction. */
  async insertVoiceConversation(em: EntityManager, c: { workspaceId: string; agentId: string; customerId: string }): Promise<string> {
    const id = newId('conv');
    await em.insert(Conversation, { id, workspaceId: c.workspaceId, customerId: c.customerId, agentId: c.agentId, channel: 'voice', status: 'open' });
    return id;
  }

  /**
   * The web conversations of these customers on this site a visitor may list: those
   * started unverified, and those `verifiedExternalId` started verified; most recently
   * touched first.
   */
  async webConversationsOfCustomers(
    em: EntityManager,
    siteId: string,
    customerIds: string[],
    verifiedExternalId: string | null,
    limit: number,
  ): Promise<Array<{ id: string; title: string | null; updated_at: Date }>> {
    if (!customerIds.length) return [];
    const rows = await em.find(
      Conversation,
      { siteId, channel: 'web', customerId: { $in: customerIds }, $or: [{ verifiedExternalId: null }, ...(verifiedExternalId !== null ? [{ verifiedExternalId }] : [])] },
      { fields: ['id', 'title', 'updatedAt'], orderBy: { updatedAt: 'desc', id: 'desc' }, limit },
    );
    return rows.map((r) => ({ id: r.id, title: r.title ?? null, updated_at: r.updatedAt }));
  }

  /** What a reply socket's authorization is checked against, for many conversations in one query. */
  async conversationsForAccess(em: EntityManager, ids: string[]): Promise<Array<{ id: string; site_id: string | null; channel: string; status: string }>> {
    if (!ids.length) return [];
    const rows = await em.find(Conversation, { id: { $in: ids } }, { fields: ['id', 'siteId', 'channel', 'status'] });
    return rows.map((r) => ({ id: r.id, site_id: r.siteId ?? null, channel: r.channel, status: r.status }));
  }
}
