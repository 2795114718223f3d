import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { CannedReply, ConversationNote, InboxAgent, InboxSettings } from '../../db/entities';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';

export interface NoteView {
  id: string;
  conversation_id: string;
  author: { id: string | null; email: string };
  text: string;
  created_at: string;
}

export interface CannedReplyView {
  id: string;
  title: string;
  text: string;
  created_at: string;
  updated_at: string;
}

export interface TeammateView {
  id: string;
  email: string;
  name: string | null;
  role: string;
  /** The inbox is open (its live stream heard from within the grace period) and not away. */
  available: boolean;
  online: boolean;
  away: boolean;
  capacity: number;
  /** Open conversations they hold now. */
  holding: number;
}

/** Roles that work conversations (a viewer reads the inbox only). */
export const WORKING_ROLES = ['owner', 'admin', 'agent'] as const;
export const DEFAULT_CAPACITY = 3;

const iso = (d: Date) => new Date(d).toISOString();

/**
 * The inbox's own tables (module inbox owns them): internal notes, canned replies, each person's presence (the live
 * stream's last heartbeat, away, capacity, the last automatic assignment: round robin's order) and the workspace's
 * automatic-assignment switch.
 */
export class InboxStore {
  constructor(private readonly em: EntityManager) {}

  async addNote(workspaceId: string, conversationId: string, author: { id: string; email: string }, text: string): Promise<NoteView> {
    const em = this.em.fork();
    const id = newId('note');
    await em.insert(ConversationNote, { id, workspaceId, conversationId, authorId: author.id, authorEmail: author.email, text });
    const row = await em.findOneOrFail(ConversationNote, { id });
    return { id, conversation_id: conversationId, author: { id: author.id, email: author.email }, text: row.text, created_at: iso(row.createdAt) };
  }

  async notes(workspaceId: string, conversationId: string): Promise<NoteView[]> {
    const rows = await this.em.fork().find(ConversationNote, { workspaceId, conversationId }, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: 500 });
    return rows.map((r) => ({ id: r.id, conversation_id: r.conversationId, author: { id: r.authorId ?? null, email: r.authorEmail }, text: r.text, created_at: iso(r.createdAt) }));
  }

  async cannedReplies(workspaceId: string): Promise<CannedReplyView[]> {
    const rows = await this.em.fork().find(CannedReply, { workspaceId }, { orderBy: { title: 'asc' }, limit: 500 });
    return rows.map(cannedView);
  }

  async createCanned(workspaceId: string, body: { title: string; text: string }): Promise<CannedReplyView> {
    const em = this.em.fork();
    const id = newId('cnr');
    try {
      await em.insert(CannedReply, { id, workspaceId, title: body.title, text: body.text });
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new DomainError('canned_reply_exists', `title: a canned reply titled '${body.title}' exists already`);
      throw err;
    }
    return cannedView(await em.findOneOrFail(CannedReply, { id }));
  }

  async updateCanned(workspaceId: string, id: string, body: { title?: string; text?: string }): Promise<CannedReplyView> {
    const em = this.em.fork();
    try {
      const changed = await em.nativeUpdate(CannedReply, { id, workspaceId }, { ...body, updatedAt: new Date() });
      if (!changed) throw new DomainError('not_found', `No canned reply with id '${id}' in this workspace`);
    } catch (err) {
      if (err instanceof UniqueConstraintViolationException) throw new DomainError('canned_reply_exists', `title: a canned reply titled '${body.title}' exists already`);
      throw err;
    }
    return cannedView(await em.findOneOrFail(CannedReply, { id }));
  }

  async deleteCanned(workspaceId: string, id: string): Promise<void> {
    if (!(await this.em.fork().nativeDelete(CannedReply, { id, workspaceId }))) throw new DomainError('not_found', `No canned reply with id '${id}' in this workspace`);
  }

  /** The live streams of these people are open now: their presence's heartbeat. */
  async touch(people: Array<{ userId: string; workspaceId: string }>): Promise<void> {
    if (!people.length) return;
    const now = new Date();
    await this.em
      .fork()
      .createQueryBuilder(InboxAgent)
      .insert(people.map((p) => ({ userId: p.userId, workspaceId: p.workspaceId, lastSeenAt: now })))
      .onConflict('userId')
      .merge(['lastSeenAt']);
  }

  /** A person's own presence settings: away (no new conversations; held ones go back to the queue) and capacity. */
  async setPresence(workspaceId: string, userId: string, set: { away?: boolean; capacity?: number }): Promise<void> {
    const fields = Object.keys(set).filter((k) => set[k as keyof typeof set] !== undefined) as Array<'away' | 'capacity'>;
    if (!fields.length) return;
    await this.em
      .fork()
      .createQueryBuilder(InboxAgent)
      .insert({ userId, workspaceId, ...set })
      .onConflict('userId')
      .merge(fields);
  }

  async presence(userId: string): Promise<{ away: boolean; capacity: number }> {
    const row = await this.em.fork().findOne(InboxAgent, { userId });
    return { away: row?.away ?? false, capacity: row?.capacity ?? DEFAULT_CAPACITY };
  }

  /** The workspace's people who work conversations, with their presence (online: heard from within `graceMs`). */
  async team(workspaceId: string, graceMs: number, holding: (ids: string[]) => Promise<Map<string, number>>): Promise<TeammateView[]> {
    // raw SQL: the people (module people's table) with their presence in one read, online measured on the database clock.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await this.em.fork().execute<Array<{ id: string; email: string; name: string | null; role: string; online: boolean; away: boolean | null; capacity: number | null }>>(
      `select u.id, u.email, u.name, u.role, coalesce(ia.last_seen_at >= now() - make_interval(secs => ?), false) as online, ia.away, ia.capacity
       from console_users u left join inbox_agents ia on ia.user_id = u.id
       where u.workspace_id = ? and u.status = 'active' and u.role in ('owner', 'admin', 'agent')
       order by lower(u.email)`,
      [graceMs / 1000, workspaceId],
    );
    const held = await holding(rows.map((r) => r.id));
    return rows.map((r) => {
      const away = r.away ?? false;
      const capacity = r.capacity ?? DEFAULT_CAPACITY;
      return { id: r.id, email: r.email, name: r.name, role: r.role, online: r.online, away, capacity, holding: held.get(r.id) ?? 0, available: r.online && !away };
    });
  }

  /** Round robin's order: available people of the workspace, the one assigned longest ago (or never) first. */
  async roundRobinOrder(workspaceId: string, graceMs: number): Promise<Array<{ id: string; capacity: number }>> {
    // raw SQL: as `team`, online measured on the database clock.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().execute<Array<{ id: string; capacity: number }>>(
      `select u.id, ia.capacity from inbox_agents ia join console_users u on u.id = ia.user_id
       where ia.workspace_id = ? and u.status = 'active' and u.role in ('owner', 'admin', 'agent') and not ia.away
         and ia.last_seen_at >= now() - make_interval(secs => ?)
       order by ia.last_assigned_at asc nulls first, u.id`,
      [workspaceId, graceMs / 1000],
    );
  }

  async markAssigned(userId: string): Promise<void> {
    await this.em.fork().nativeUpdate(InboxAgent, { userId }, { lastAssignedAt: new Date() });
  }

  async settings(workspaceId: string): Promise<{ auto_assign: boolean }> {
    const row = await this.em.fork().findOne(InboxSettings, { workspaceId });
    return { auto_assign: row?.autoAssign ?? false };
  }

  async setSettings(workspaceId: string, set: { auto_assign: boolean }): Promise<{ auto_assign: boolean }> {
    await this.em.fork().createQueryBuilder(InboxSettings).insert({ workspaceId, autoAssign: set.auto_assign, updatedAt: new Date() }).onConflict('workspaceId').merge(['autoAssign', 'updatedAt']);
    return this.settings(workspaceId);
  }

  /** Workspaces whose automatic assignment is on, among these. */
  async autoAssigning(workspaceIds: string[]): Promise<string[]> {
    if (!workspaceIds.length) return [];
    const rows = await this.em.fork().find(InboxSettings, { workspaceId: { $in: workspaceIds }, autoAssign: true }, { fields: ['workspaceId'] });
    return rows.map((r) => r.workspaceId);
  }
}

const cannedView = (r: { id: string; title: string; text: string; createdAt: Date; updatedAt: Date }): CannedReplyView => ({
  id: r.id,
  title: r.title,
  text: r.text,
  created_at: iso(r.createdAt),
  updated_at: iso(r.updatedAt),
});
