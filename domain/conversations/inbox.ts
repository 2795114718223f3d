import type { EntityManager } from '@mikro-orm/postgresql';
import { Conversation, ConversationEvent, type IConversation } from '../../db/entities';
import { newId } from '../../lib/ids';

/** The inbox's filters of status (docs/console.md "The inbox"). */
export const INBOX_STATUSES = ['all', 'open', 'needs_human', 'mine', 'unassigned', 'closed'] as const;
export type InboxStatus = (typeof INBOX_STATUSES)[number];

export interface InboxFilter {
  status: InboxStatus;
  channel?: 'web' | 'msgapp' | 'voice';
  agent_id?: string;
  site_id?: string;
  /** Words searched in the transcript (full text, 'simple' configuration: every word, as written). */
  q?: string;
  limit: number;
  cursor?: string;
}

export interface InboxRow {
  id: string;
  workspace_id: string;
  channel: 'web' | 'msgapp' | 'voice';
  status: 'open' | 'closed';
  needs_human: boolean;
  case_reason: string | null;
  title: string | null;
  agent: { id: string; name: string } | null;
  site_id: string | null;
  customer: { id: string; name: string | null; email: string | null; phone: string | null } | null;
  assignee: { id: string; email: string; name: string | null } | null;
  queued_at: string | null;
  assigned_at: string | null;
  close_reason: string | null;
  last_message: string | null;
  /** The customer's last message (msgapp: the 24-hour window runs from it). */
  last_inbound_at: string | null;
  created_at: string;
  updated_at: string;
}

/** Transcript lines a search looks through at most: a search stays bounded however large the workspace. */
const SEARCH_MATCH_CAP = 2_000;

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

interface RawRow {
  id: string;
  workspace_id: string;
  channel: InboxRow['channel'];
  status: InboxRow['status'];
  needs_human: boolean;
  case_reason: string | null;
  title: string | null;
  agent_id: string | null;
  agent_name: string | null;
  site_id: string | null;
  customer_id: string | null;
  customer_name: string | null;
  customer_email: string | null;
  customer_phone: string | null;
  assignee_id: string | null;
  assignee_email: string | null;
  assignee_name: string | null;
  queued_at: Date | null;
  assigned_at: Date | null;
  close_reason: string | null;
  last_message: string | null;
  last_inbound_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const rowOf = (r: RawRow): InboxRow => ({
  id: r.id,
  workspace_id: r.workspace_id,
  channel: r.channel,
  status: r.status,
  needs_human: r.needs_human,
  case_reason: r.case_reason,
  title: r.title,
  agent: r.agent_id ? { id: r.agent_id, name: r.agent_name ?? r.agent_id } : null,
  site_id: r.site_id,
  customer: r.customer_id ? { id: r.customer_id, name: r.customer_name, email: r.customer_email, phone: r.customer_phone } : null,
  assignee: r.assignee_id && r.assignee_email ? { id: r.assignee_id, email: r.assignee_email, name: r.assignee_name } : null,
  queued_at: iso(r.queued_at),
  assigned_at: iso(r.assigned_at),
  close_reason: r.close_reason,
  last_message: r.last_message,
  last_inbound_at: iso(r.last_inbound_at),
  created_at: iso(r.created_at)!,
  updated_at: iso(r.updated_at)!,
});

const encodeCursor = (at: string, id: string) => Buffer.from(JSON.stringify([at, id])).toString('base64url');
function decodeCursor(cursor: string): [string, string] | null {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as unknown;
    return Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'string' && !Number.isNaN(Date.parse(v[0])) ? [v[0], v[1]] : null;
  } catch {
    return null;
  }
}

/** What a take or an assignment found. */
export type AssignOutcome =
  | { kind: 'assigned'; wasNeedsHuman: boolean; waitMs: number | null }
  /** Held already by this very person: nothing changed. */
  | { kind: 'already_yours' }
  | { kind: 'taken'; by: string | null }
  | { kind: 'closed' }
  | { kind: 'missing' };

/**
 * The inbox's reads and writes of `conversations` (module conversations owns the table): the list with its filters and
 * search, and who holds a conversation. One person at most: a take is a conditional UPDATE … WHERE assignee_id IS
 * NULL, so of two at once exactly one changes the row. Wait time (queued → assigned) and handle time (assigned →
 * handed back, closed or re-queued) are written on the timeline as `inbox.*` events for analytics.
 */
export class ConversationInbox {
  constructor(private readonly em: EntityManager) {}

  /** A page of the workspace's conversations, newest activity first (the queue, `unassigned`: longest waiting first). */
  async list(workspaceId: string, userId: string, f: InboxFilter): Promise<{ conversations: InboxRow[]; next_cursor: string | null }> {
    // Console test conversations ("Try it") are in no list; nor is a web chat nobody wrote in yet (a widget opened
    // and left), unless a person was asked for.
    const where: string[] = [
      'c.workspace_id = ?',
      'not c.is_test',
      `(c.channel <> 'web' or c.needs_human or exists (select 1 from chat_messages m where m.conversation_id = c.id and m.role <> 'tool'))`,
    ];
    const params: unknown[] = [workspaceId];
    const queue = f.status === 'unassigned';
    if (f.status === 'open') where.push(`c.status = 'open'`);
    if (f.status === 'needs_human') where.push(`c.status = 'open' and c.needs_human`);
    if (f.status === 'mine') {
      where.push(`c.status = 'open' and c.assignee_id = ?`);
      params.push(userId);
    }
    if (queue) where.push(`c.status = 'open' and c.needs_human and c.assignee_id is null`);
    if (f.status === 'closed') where.push(`c.status = 'closed'`);
    for (const [column, value] of [
      ['channel', f.channel],
      ['agent_id', f.agent_id],
      ['site_id', f.site_id],
    ] as const) {
      if (!value) continue;
      where.push(`c.${column} = ?`);
      params.push(value);
    }
    if (f.q?.trim()) {
      // The GIN index on to_tsvector('simple', text) (role <> 'tool') finds the lines; at most SEARCH_MATCH_CAP of them.
      where.push(
        `c.id in (select m.conversation_id from chat_messages m where m.workspace_id = ? and m.role <> 'tool' and to_tsvector('simple', m.text) @@ plainto_tsquery('simple', ?) limit ${SEARCH_MATCH_CAP})`,
      );
      params.push(workspaceId, f.q.trim());
    }
    const order = queue ? 'c.queued_at asc, c.id asc' : 'c.updated_at desc, c.id desc';
    const after = f.cursor ? decodeCursor(f.cursor) : null;
    if (after) {
      where.push(queue ? '(c.queued_at, c.id) > (?::timestamptz, ?)' : '(c.updated_at, c.id) < (?::timestamptz, ?)');
      params.push(after[0], after[1]);
    }
    // raw SQL: one page is one statement: the filters, the transcript search, the newest visible line of each and the
    // names (agent, customer, assignee) a row shows; the ORM cannot say the lateral read nor the full-text match.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await this.em.fork().execute<RawRow[]>(
      `select c.id, c.workspace_id, c.channel, c.status, c.needs_human, c.case_reason, c.title, c.agent_id, a.name as agent_name, c.site_id,
              c.customer_id, cu.name as customer_name, cu.email as customer_email, cu.phone as customer_phone,
              c.assignee_id, u.email as assignee_email, u.name as assignee_name, c.queued_at, c.assigned_at, c.close_reason,
              last.text as last_message, c.last_inbound_at, c.created_at, c.updated_at
       from conversations c
       left join agents a on a.id = c.agent_id
       left join customers cu on cu.id = c.customer_id
       left join console_users u on u.id = c.assignee_id
       left join lateral (select m.text from chat_messages m where m.conversation_id = c.id and m.role <> 'tool' order by m.created_at desc, m.id desc limit 1) last on true
       where ${where.join(' and ')}
       order by ${order}
       limit ?`,
      [...params, f.limit + 1],
    );
    const page = rows.slice(0, f.limit).map(rowOf);
    const last = page[page.length - 1];
    const next = rows.length > f.limit && last ? encodeCursor(queue ? last.queued_at! : last.updated_at, last.id) : null;
    return { conversations: page, next_cursor: next };
  }

  /** One conversation of the workspace as the inbox shows it, or null. */
  async row(workspaceId: string, id: string): Promise<InboxRow | null> {
    // raw SQL: the same row as the list's (see list).
    // eslint-disable-next-line no-restricted-syntax
    const rows = await this.em.fork().execute<RawRow[]>(
      `select c.id, c.workspace_id, c.channel, c.status, c.needs_human, c.case_reason, c.title, c.agent_id, a.name as agent_name, c.site_id,
              c.customer_id, cu.name as customer_name, cu.email as customer_email, cu.phone as customer_phone,
              c.assignee_id, u.email as assignee_email, u.name as assignee_name, c.queued_at, c.assigned_at, c.close_reason,
              null as last_message, c.last_inbound_at, c.created_at, c.updated_at
       from conversations c
       left join agents a on a.id = c.agent_id
       left join customers cu on cu.id = c.customer_id
       left join console_users u on u.id = c.assignee_id
       where c.workspace_id = ? and c.id = ?`,
      [workspaceId, id],
    );
    return rows[0] ? rowOf(rows[0]) : null;
  }

  /** How many open conversations the queue holds (needing a person, nobody's yet). */
  async queueLength(workspaceId: string): Promise<number> {
    return this.em.fork().count(Conversation, { workspaceId, status: 'open', needsHuman: true, assigneeId: null, isTest: false });
  }

  /**
   * Gives the conversation to `assigneeId` when nobody holds it (`from: null`), or when `from` holds it (a person
   * passing on their own, or any holder for `from: 'anyone'`): one conditional UPDATE, so of two takes at once exactly
   * one wins. The agent stops answering (needs_human); the wait since it was queued is recorded.
   */
  async assign(workspaceId: string, id: string, assigneeId: string, by: { id: string | null; how: 'take' | 'assign' | 'round_robin' }, from: string | null | 'anyone' = null): Promise<AssignOutcome> {
    return this.em.fork().transactional(async (tx) => {
      const before = await tx.findOne(Conversation, { id, workspaceId }, { fields: ['status', 'needsHuman', 'assigneeId', 'queuedAt'], refresh: true });
      if (!before) return { kind: 'missing' } as const;
      if (before.status !== 'open') return { kind: 'closed' } as const;
      if (before.assigneeId === assigneeId && before.needsHuman) return { kind: 'already_yours' } as const;
      const now = new Date();
      const condition = from === 'anyone' ? {} : { assigneeId: from };
      const changed = await tx.nativeUpdate(
        Conversation,
        { id, workspaceId, status: 'open', ...condition },
        { assigneeId, assignedAt: now, needsHuman: true, queuedAt: before.queuedAt ?? now, updatedAt: now, ...(before.needsHuman ? {} : { caseReason: 'taken over by a person' }) },
      );
      if (!changed) {
        const holder = await tx.findOne(Conversation, { id }, { fields: ['assigneeId', 'status'], refresh: true });
        return holder?.status === 'closed' ? ({ kind: 'closed' } as const) : ({ kind: 'taken', by: holder?.assigneeId ?? null } as const);
      }
      const waitMs = before.queuedAt ? Math.max(0, now.getTime() - new Date(before.queuedAt).getTime()) : 0;
      await tx.insert(ConversationEvent, { id: newId('evt'), conversationId: id, type: 'inbox.assigned', data: { assignee_id: assigneeId, by: by.id, how: by.how, wait_ms: waitMs, ...(before.assigneeId ? { from: before.assigneeId } : {}) } });
      return { kind: 'assigned', wasNeedsHuman: before.needsHuman, waitMs } as const;
    });
  }

  /**
   * Back to the agent: nobody holds it, the agent answers the next message; the time it was held is recorded.
   * False when it was not waiting for or held by a person.
   */
  async handBack(workspaceId: string, id: string, by: string): Promise<boolean> {
    return this.em.fork().transactional(async (tx) => {
      const before = await tx.findOne(Conversation, { id, workspaceId, status: 'open' }, { fields: ['needsHuman', 'assigneeId', 'assignedAt'], refresh: true });
      if (!before?.needsHuman) return false;
      const now = new Date();
      await tx.nativeUpdate(Conversation, { id }, { needsHuman: false, caseReason: null, assigneeId: null, assignedAt: null, queuedAt: null, updatedAt: now });
      await tx.insert(ConversationEvent, { id: newId('evt'), conversationId: id, type: 'inbox.handed_back', data: { by, assignee_id: before.assigneeId ?? null, handle_ms: handleMs(before, now) } });
      return true;
    });
  }

  /** Closes it with the reason; the time it was held is recorded. False when it was closed already. */
  async close(workspaceId: string, id: string, by: string, reason: string): Promise<boolean> {
    return this.em.fork().transactional(async (tx) => {
      const before = await tx.findOne(Conversation, { id, workspaceId, status: 'open' }, { fields: ['assigneeId', 'assignedAt'], refresh: true });
      if (!before) return false;
      const now = new Date();
      const changed = await tx.nativeUpdate(Conversation, { id, status: 'open' }, { status: 'closed', closedAt: now, closeReason: reason, queuedAt: null, updatedAt: now });
      if (!changed) return false;
      await tx.insert(ConversationEvent, { id: newId('evt'), conversationId: id, type: 'inbox.closed', data: { by, reason, assignee_id: before.assigneeId ?? null, handle_ms: handleMs(before, now) } });
      return true;
    });
  }

  /** Appends one `inbox.*` entry to the conversation's timeline. */
  async addEvent(conversationId: string, type: string, data: Record<string, unknown>): Promise<void> {
    await this.em.fork().insert(ConversationEvent, { id: newId('evt'), conversationId, type, data });
  }

  /**
   * The open conversations held by people who went offline (their live stream gone for longer than `graceMs`) or
   * away: what goes back to the queue (at most `limit` a pass).
   */
  async unavailableHolders(graceMs: number, limit = 200): Promise<Array<{ id: string; workspace_id: string; channel: InboxRow['channel']; assignee_id: string; away: boolean }>> {
    // raw SQL: the holders' presence (module inbox's table) measured on the database clock, in one read.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().execute(
      `select c.id, c.workspace_id, c.channel, c.assignee_id, ia.away from conversations c join inbox_agents ia on ia.user_id = c.assignee_id
       where c.status = 'open' and c.assignee_id is not null
         and (ia.away or ia.last_seen_at is null or ia.last_seen_at < now() - make_interval(secs => ?))
       limit ?`,
      [graceMs / 1000, limit],
    );
  }

  /**
   * Back to the queue from `from` (still its holder: a conditional UPDATE), keeping its place (queued_at unchanged:
   * the longest waiting first); the time it was held is recorded. False when `from` no longer holds it.
   */
  async requeue(workspaceId: string, id: string, from: string, reason: 'offline' | 'away'): Promise<boolean> {
    return this.em.fork().transactional(async (tx) => {
      const before = await tx.findOne(Conversation, { id, workspaceId, status: 'open', assigneeId: from }, { fields: ['assignedAt'], refresh: true });
      if (!before) return false;
      const now = new Date();
      if (!(await tx.nativeUpdate(Conversation, { id, status: 'open', assigneeId: from }, { assigneeId: null, assignedAt: null, updatedAt: now }))) return false;
      await tx.insert(ConversationEvent, { id: newId('evt'), conversationId: id, type: 'inbox.requeued', data: { assignee_id: from, reason, handle_ms: handleMs(before, now) } });
      return true;
    });
  }

  /** The queue's head: open conversations waiting for a person, longest waiting first. */
  async queued(workspaceId: string, limit: number): Promise<Array<{ id: string; channel: InboxRow['channel'] }>> {
    const rows = await this.em.fork().find(
      Conversation,
      { workspaceId, status: 'open', needsHuman: true, assigneeId: null, isTest: false },
      { fields: ['id', 'channel'], orderBy: { queuedAt: 'asc', id: 'asc' }, limit },
    );
    return rows.map((r) => ({ id: r.id, channel: r.channel }));
  }

  /** Open conversations each of these people holds now. */
  async heldBy(userIds: string[]): Promise<Map<string, number>> {
    if (!userIds.length) return new Map();
    const rows = await this.em.fork().find(Conversation, { assigneeId: { $in: userIds }, status: 'open' }, { fields: ['assigneeId'] });
    const out = new Map<string, number>();
    for (const r of rows) out.set(r.assigneeId!, (out.get(r.assigneeId!) ?? 0) + 1);
    return out;
  }

  /** The workspaces with someone waiting in their queue (automatic assignment looks at these). */
  async workspacesWithQueue(workspaceIds: string[]): Promise<string[]> {
    if (!workspaceIds.length) return [];
    const rows = await this.em.fork().find(Conversation, { workspaceId: { $in: workspaceIds }, status: 'open', needsHuman: true, assigneeId: null, isTest: false }, { fields: ['workspaceId'] });
    return [...new Set(rows.map((r) => r.workspaceId))];
  }
}

function handleMs(row: Pick<IConversation, 'assignedAt'>, now: Date): number | null {
  return row.assignedAt ? Math.max(0, now.getTime() - new Date(row.assignedAt).getTime()) : null;
}
