import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { ConversationRepository } from '../conversations/repository';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import type { CardElement, ChartElement } from './elements';
import { titleOf } from './answer-without-model';
import { ChatFrames } from './frames';
import type { RichBlockValue } from './rich';
import { ChatMessage, type IChatMessage } from '../../db/entities';

export type ChatRole = 'user' | 'assistant' | 'human' | 'tool';

export interface ChatMessageRow {
  id: string;
  workspace_id: string;
  conversation_id: string;
  role: ChatRole;
  client_message_id: string | null;
  reply_to: string | null;
  text: string;
  attachments: unknown[];
  extras: ReplyExtras;
  unsolicited: boolean;
  created_at: Date;
}

function rowOf(m: IChatMessage): ChatMessageRow {
  return {
    id: m.id,
    workspace_id: m.workspaceId,
    conversation_id: m.conversationId,
    role: m.role,
    client_message_id: m.clientMessageId ?? null,
    reply_to: m.replyTo ?? null,
    text: m.text,
    attachments: m.attachments,
    extras: m.extras as ReplyExtras,
    unsolicited: m.unsolicited,
    created_at: m.createdAt,
  };
}

/** The optional parts of a reply; only non-empty ones are stored and sent. */
export interface ReplyExtras {
  charts?: ChartElement[];
  cards?: CardElement[];
  rich?: RichBlockValue[];
  suggested_actions?: string[];
  /** A human agent's name and picture (messages written by a person). */
  author?: { name?: string; avatar_url?: string };
  /** The files whose passages the reply used (stored before titles and links: file names only, titled from the name). */
  citations?: StoredCitation[];
}

export interface HistoryMessage {
  id: string;
  role: 'user' | 'assistant';
  text: string;
  timestamp: string;
  attachments: unknown[];
  /** A human agent wrote it (role is then `assistant`). */
  author?: 'human';
  author_name?: string;
  author_avatar_url?: string;
  charts?: ChartElement[];
  cards?: CardElement[];
  rich?: RichBlockValue[];
  suggested_actions?: string[];
  citations?: VisitorCitation[];
}

/** A cited file as stored with the reply: its title when it was cited, and a signed link when it may be handed out. */
export interface StoredCitation {
  file_id: string;
  file_name: string;
  title?: string;
  url?: string;
}

/**
 * A cited file as a visitor sees it: its title (the document's, else from its name: "returns-policy.md" →
 * "Returns policy"), never the file name; `url` only for a knowledge-base file the agent may hand out.
 */
export interface VisitorCitation {
  file_id: string;
  title: string;
  url?: string;
}

const visitorCitations = (e: ReplyExtras): VisitorCitation[] => {
  const seen = new Set<string>();
  const out: VisitorCitation[] = [];
  for (const c of e.citations ?? []) {
    const title = c.title || titleOf(c.file_name);
    // Two chunks' files, or two files, of one title are one source to a visitor.
    if (seen.has(title)) continue;
    seen.add(title);
    out.push({ file_id: c.file_id, title, ...(c.url ? { url: c.url } : {}) });
  }
  return out;
};

/** The persisted reply as the socket's `reply` frame carries it (optional fields only when non-empty). */
export function replyFrame(row: Pick<ChatMessageRow, 'id' | 'text' | 'attachments' | 'extras' | 'unsolicited'> & { role?: ChatRole }) {
  const e = row.extras ?? {};
  const citations = visitorCitations(e);
  return {
    type: 'reply' as const,
    reply_id: row.id,
    text: row.text,
    ...(row.attachments?.length ? { attachments: row.attachments } : {}),
    ...(e.charts?.length ? { charts: e.charts } : {}),
    ...(e.cards?.length ? { cards: e.cards } : {}),
    ...(e.rich?.length ? { rich: e.rich } : {}),
    ...(e.suggested_actions?.length ? { suggested_actions: e.suggested_actions } : {}),
    ...(citations.length ? { citations } : {}),
    ...(row.role === 'human' ? humanAuthor(e) : {}),
    ...(row.unsolicited ? { unsolicited: true as const } : {}),
  };
}

/** A human agent's message as the widget shows it: `author: human`, with the person's name and picture when given. */
function humanAuthor(e: ReplyExtras): { author: 'human'; author_name?: string; author_avatar_url?: string } {
  return {
    author: 'human',
    ...(e.author?.name ? { author_name: e.author.name } : {}),
    ...(e.author?.avatar_url ? { author_avatar_url: e.author.avatar_url } : {}),
  };
}

/** Keeps only the non-empty extras. */
export function compactExtras(e: ReplyExtras): ReplyExtras {
  return Object.fromEntries(Object.entries(e).filter(([k, v]) => (Array.isArray(v) ? v.length : k === 'author' && v))) as ReplyExtras;
}

/** A message to append to a conversation's transcript. */
export interface NewChatMessage {
  id: string;
  workspaceId: string;
  conversationId: string;
  role: ChatRole;
  text: string;
  clientMessageId?: string | null;
  replyTo?: string | null;
  attachments?: unknown[];
  extras?: ReplyExtras;
  unsolicited?: boolean;
}

/** The title a customer's line gives its conversation while it has none (`touchConversation`). */
export function transcriptTitle(m: Pick<NewChatMessage, 'role' | 'text'>): string | null {
  return m.role === 'user' && m.text ? m.text.slice(0, 80) : null;
}

/**
 * The transcript of conversations, on every channel: what the agent reads and the
 * conversation shows. Every message (visitor or customer, agent, human agent, tool
 * activity) is a row — on msgapp too, where `messages` keeps the provider's side
 * (delivery statuses) of the same ids; inserts are idempotent on their id (and, for the visitor,
 * on the client's message id), so a retried activity never writes a message twice.
 * Within a conversation timestamps strictly increase, so a timestamp is a safe cursor.
 */
export class ChatTranscript {
  /** A blob owner kind (BlobRefRepository): how many messages carry these bytes as an attachment (inbound msgapp media). */
  static async blobUses(em: EntityManager, sha256: string): Promise<number> {
    // raw SQL: jsonb containment (an element of the attachments array with this sha256) has no ORM form; the GIN index answers it.
    // eslint-disable-next-line no-restricted-syntax
    const [row] = await em.execute<{ n: string }[]>(`select count(*) as n from ${em.getMetadata(ChatMessage).tableName} where attachments @> ?::jsonb`, [JSON.stringify([{ sha256 }])]);
    return Number(row.n);
  }

  private readonly frames: ChatFrames;

  constructor(
    private readonly em: EntityManager,
    /** Default: the one repository of conversations (tests and the socket hub build a transcript on its own). */
    private readonly conversations: ConversationRepository = new ConversationRepository(),
  ) {
    this.frames = new ChatFrames(em);
  }

  /**
   * Appends a message unless one with the same id (or the same client message id) is
   * there already; returns the stored row either way. In the caller's transaction when
   * `em` is one (then `touchEm` is the same `em`); else the conversation is touched on
   * `touchEm` while the row is read back.
   */
  async appendIn(em: EntityManager, m: NewChatMessage, touchEm: EntityManager = em): Promise<{ row: ChatMessageRow; created: boolean }> {
    return (await this.appendManyIn(em, [m], touchEm))[0];
  }

  /**
   * `appendIn` for several messages (the msgapp webhook's batch), in one insert: each row's time is strictly
   * increasing per conversation (1 ms after the newest, and a conversation's later rows of the batch 1 ms apart),
   * so `before` never splits a tie. Answers in the order given.
   */
  async appendManyIn(
    em: EntityManager,
    ms: NewChatMessage[],
    touchEm: EntityManager = em,
    /** False: the caller touches the conversations itself (`transcriptTitle` gives their titles). */
    opts: { touch?: boolean } = {},
  ): Promise<Array<{ row: ChatMessageRow; created: boolean }>> {
    if (!ms.length) return [];
    const now = new Date().toISOString();
    const nth = new Map<string, number>();
    const given = ms.map((m) => {
      const k = nth.get(m.conversationId) ?? 0;
      nth.set(m.conversationId, k + 1);
      return {
        id: m.id,
        workspace_id: m.workspaceId,
        conversation_id: m.conversationId,
        role: m.role,
        client_message_id: m.clientMessageId ?? null,
        reply_to: m.replyTo ?? null,
        text: m.text,
        attachments: m.attachments ?? [],
        extras: compactExtras(m.extras ?? {}),
        unsolicited: m.unsolicited ?? false,
        k,
      };
    });
    // One statement: the rows and their times, read back as stored. raw SQL: the time is computed from the
    // conversation's newest row in the insert itself, and the rows come back with RETURNING (the ORM's insert neither
    // computes a value from a subquery nor returns the rows): one round trip (a voice turn and a msgapp webhook wait
    // on it). Without a conflict target: a second insert of an id, or of a client message id (the partial unique index
    // chat_messages_client_uq), does nothing and returns nothing.
    // eslint-disable-next-line no-restricted-syntax
    const inserted = await em.execute<Record<string, unknown>[]>(
      `insert into chat_messages (id, workspace_id, conversation_id, role, client_message_id, reply_to, text, attachments, extras, unsolicited, created_at)
       select g.id, g.workspace_id, g.conversation_id, g.role, g.client_message_id, g.reply_to, g.text, g.attachments, g.extras, g.unsolicited,
              greatest(?::timestamptz, (select max(c.created_at) + interval '1 millisecond' from chat_messages c where c.conversation_id = g.conversation_id))
                + g.k * interval '1 millisecond'
       from jsonb_to_recordset(?::jsonb) as g (id text, workspace_id text, conversation_id text, role text, client_message_id text, reply_to text, text text,
                                             attachments jsonb, extras jsonb, unsolicited boolean, k int)
       on conflict do nothing
       returning *`,
      [now, JSON.stringify(given)],
    );
    const byId = new Map(inserted.map((r) => [r.id as string, r]));
    // Touched once per conversation, titled by its first customer line.
    if (opts.touch !== false) {
      const touched = new Map<string, string | null>();
      for (const m of ms) if (byId.has(m.id)) touched.set(m.conversationId, touched.get(m.conversationId) ?? transcriptTitle(m));
      await this.conversations.touchConversations(touchEm, [...touched].map(([id, title]) => ({ id, title })));
    }
    const out: Array<{ row: ChatMessageRow; created: boolean }> = [];
    for (const m of ms) {
      const row = byId.get(m.id);
      if (row) {
        out.push({ row: rowOf(em.map(ChatMessage, row)), created: true });
        continue;
      }
      const existing =
        (await em.findOne(ChatMessage, { id: m.id })) ??
        (m.clientMessageId ? await em.findOne(ChatMessage, { conversationId: m.conversationId, clientMessageId: m.clientMessageId }) : null);
      if (!existing) throw new Error(`chat message ${m.id} was neither inserted nor found`);
      out.push({ row: rowOf(existing), created: false });
    }
    return out;
  }

  /**
   * A human agent's message into a web conversation (POST /api/v1/outbound, channel
   * `web`): stored as written by a human (the visitor's history shows it with
   * `author: human`) and pushed to the visitor's sockets as an unsolicited reply.
   */
  async humanMessage(
    workspaceId: string,
    m: { conversation_id: string; text: string; author_name?: string; author_avatar_url?: string },
  ): Promise<{ id: string; channel: 'web'; conversation_id: string; text: string; author: 'human'; author_name: string | null; author_avatar_url: string | null; created_at: string }> {
    const conv = await this.conversations.conversationInWorkspace(this.em.fork(), workspaceId, m.conversation_id);
    if (!conv) throw new DomainError('not_found', `No conversation with id '${m.conversation_id}' in this workspace`);
    if (conv.channel !== 'web') throw new DomainError('invalid_request', `conversation_id: conversation '${conv.id}' is a ${conv.channel} conversation, not web (msgapp messages are sent with POST /api/v1/messages)`);
    if (conv.status !== 'open') throw new DomainError('conversation_closed', `Conversation '${conv.id}' is closed`);
    const author = { ...(m.author_name ? { name: m.author_name } : {}), ...(m.author_avatar_url ? { avatar_url: m.author_avatar_url } : {}) };
    const { row } = await this.append({
      id: newId('msg'),
      workspaceId,
      conversationId: conv.id,
      role: 'human',
      text: m.text,
      unsolicited: true,
      ...(Object.keys(author).length ? { extras: { author } } : {}),
    });
    await this.frames.publish(conv.id, replyFrame(row), row.id);
    return {
      id: row.id,
      channel: 'web',
      conversation_id: conv.id,
      text: row.text,
      author: 'human',
      author_name: m.author_name ?? null,
      author_avatar_url: m.author_avatar_url ?? null,
      created_at: new Date(row.created_at).toISOString(),
    };
  }

  /**
   * Appends a message unless one with the same id (or the same client message id) is
   * there already; returns the stored row either way.
   */
  async append(m: NewChatMessage): Promise<{ row: ChatMessageRow; created: boolean }> {
    return this.appendIn(this.em.fork(), m, this.em.fork());
  }

  /**
   * Stores a visitor's message once per client message id (the API does, before it tells
   * the conversation's actor, so the actor only ever hears of stored messages). Says
   * whether this call stored it, and the reply it already has, if any.
   */
  async storeVisitorMessage(m: { id: string; workspaceId: string; conversationId: string; clientMessageId: string; text: string; uploadIds: string[] }) {
    const { row, created } = await this.append({
      id: m.id,
      workspaceId: m.workspaceId,
      conversationId: m.conversationId,
      role: 'user',
      text: m.text,
      clientMessageId: m.clientMessageId,
      attachments: m.uploadIds.map((id) => ({ upload_id: id })),
    });
    const reply = created ? null : await this.replyTo(row.id);
    return { message_id: row.id, created, reply_id: reply?.id ?? null };
  }

  /**
   * Takes back a visitor message the actor refused (the conversation closed, a blocking
   * task running): the send was answered 409, so the message was never taken. Only an
   * unanswered visitor message goes (the condition and the delete are one statement).
   */
  async withdraw(conversationId: string, messageId: string): Promise<void> {
    const em = this.em.fork();
    const answered = em.createQueryBuilder(ChatMessage).select('replyTo').where({ replyTo: messageId });
    await em.nativeDelete(ChatMessage, { id: { $eq: messageId, $nin: answered.getKnexQuery() as never }, conversationId, role: 'user' });
  }

  /** Marks transcript lines with the channel they were said on (`extras.channel`: voice turns of a web conversation). */
  async markChannel(ids: string[], channel: 'voice'): Promise<void> {
    if (!ids.length) return;
    // raw SQL: a jsonb merge has no ORM form (the ORM would overwrite extras whole).
    // eslint-disable-next-line no-restricted-syntax
    await this.em.fork().execute(`update chat_messages set extras = extras || jsonb_build_object('channel', ?::text) where id in (${ids.map(() => '?').join(', ')})`, [channel, ...ids]);
  }

  /**
   * Tells the conversation's other sockets (another tab, another device of the visitor) of a visitor message the
   * actor took: a `visitor_message` frame, never a `reply` (which a client renders as the assistant's). `reply_id`
   * names the turn that answers it, so a client shows the message before that reply.
   */
  async announceVisitorMessage(conversationId: string, ids: { message_id: string; reply_id: string; client_message_id: string }, describeAttachments: (attachments: unknown[]) => Promise<unknown[]>): Promise<void> {
    const row = await this.get(ids.message_id);
    if (!row) return;
    const attachments = row.attachments?.length ? await describeAttachments(row.attachments) : [];
    await this.frames.publish(conversationId, {
      type: 'visitor_message',
      message_id: row.id,
      client_message_id: ids.client_message_id,
      reply_id: ids.reply_id,
      text: row.text,
      timestamp: new Date(row.created_at).toISOString(),
      ...(attachments.length ? { attachments } : {}),
    });
  }

  /** Whether a person holds the conversation (what a socket is told first, as a `handoff` frame). */
  async handedOff(conversationId: string): Promise<boolean> {
    return this.conversations.conversationNeedsHuman(this.em.fork(), conversationId);
  }

  async get(id: string): Promise<ChatMessageRow | null> {
    const row = await this.em.fork().findOne(ChatMessage, { id });
    return row ? rowOf(row) : null;
  }

  /** Replaces a message's attachments (an inbound media item's text, once read). */
  async replaceAttachments(messageId: string, attachments: unknown[]): Promise<void> {
    await this.em.fork().nativeUpdate(ChatMessage, { id: messageId }, { attachments });
  }

  /** The stored reply to a visitor message, if any. */
  async replyTo(messageId: string): Promise<ChatMessageRow | null> {
    const row = await this.em.fork().findOne(ChatMessage, { replyTo: messageId, role: 'assistant' }, { orderBy: { createdAt: 'asc' } });
    return row ? rowOf(row) : null;
  }

  /** The last `n` messages before (and excluding) `untilId`'s turn, oldest first: the model's context. */
  async recent(conversationId: string, n: number): Promise<ChatMessageRow[]> {
    const rows = await this.em.fork().find(ChatMessage, { conversationId }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: n });
    return rows.map(rowOf).reverse();
  }

  /** Replies (agent or human) written after message `afterId`: what a reconnecting socket missed. */
  async repliesAfter(conversationId: string, afterId: string): Promise<ChatMessageRow[]> {
    const em = this.em.fork();
    const after = await em.findOne(ChatMessage, { id: afterId, conversationId }, { fields: ['createdAt'] });
    if (!after) return [];
    const rows = await em.find(
      ChatMessage,
      { conversationId, role: { $in: ['assistant', 'human'] }, createdAt: { $gt: after.createdAt } },
      { orderBy: { createdAt: 'asc', id: 'asc' } },
    );
    return rows.map(rowOf);
  }

  /**
   * One page of the visitor-facing transcript: the latest `limit` messages strictly older
   * than `before`, oldest first. Tool activity is never shown.
   */
  async history(
    conversationId: string,
    q: { limit: number; before?: string },
    resignAttachments: (attachments: unknown[]) => Promise<unknown[]>,
    /** Signs the citations' links afresh (a stored one may have expired). */
    resignCitations: (citations: VisitorCitation[]) => Promise<VisitorCitation[]> = async (c) => c,
  ): Promise<{ messages: HistoryMessage[]; has_more: boolean; next_before: string | null }> {
    const before = q.before && !Number.isNaN(Date.parse(q.before)) ? new Date(q.before) : null;
    const where: FilterQuery<IChatMessage> = { conversationId, role: { $ne: 'tool' } };
    if (before) where.createdAt = { $lt: before };
    const rows = (await this.em.fork().find(ChatMessage, where, { orderBy: { createdAt: 'desc', id: 'desc' }, limit: q.limit + 1 })).map(rowOf);
    const has_more = rows.length > q.limit;
    const page = rows.slice(0, q.limit).reverse();
    const messages: HistoryMessage[] = [];
    for (const r of page) {
      const e = r.extras ?? {};
      const citations = await resignCitations(visitorCitations(e));
      messages.push({
        id: r.id,
        role: r.role === 'user' ? 'user' : 'assistant',
        text: r.text,
        timestamp: new Date(r.created_at).toISOString(),
        attachments: r.attachments?.length ? await resignAttachments(r.attachments) : [],
        ...(r.role === 'human' ? humanAuthor(e) : {}),
        ...(e.charts?.length ? { charts: e.charts } : {}),
        ...(e.cards?.length ? { cards: e.cards } : {}),
        ...(e.rich?.length ? { rich: e.rich } : {}),
        ...(e.suggested_actions?.length ? { suggested_actions: e.suggested_actions } : {}),
        ...(citations.length ? { citations } : {}),
      });
    }
    return { messages, has_more, next_before: page.length ? new Date(page[0].created_at).toISOString() : null };
  }

  /**
   * The workspace's messages in `[from, to)` by their conversation's channel and direction (the customer's `in`, the
   * agent's and human agents' replies `out`; tool activity left out): analytics' partial hours (domain/analytics).
   */
  async messageCounts(workspaceId: string, from: Date, to: Date): Promise<Array<{ channel: string; direction: 'in' | 'out'; n: string }>> {
    // raw SQL: a count grouped by a computed direction over a join has no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    return this.em.fork().getConnection().execute<Array<{ channel: string; direction: 'in' | 'out'; n: string }>>(
      `select c.channel, case when m.role = 'user' then 'in' else 'out' end as direction, count(*) as n
       from chat_messages m join conversations c on c.id = m.conversation_id
       where m.workspace_id = ? and m.created_at >= ? and m.created_at < ? and m.role <> 'tool' and not c.is_test
       group by 1, 2`,
      [workspaceId, from, to],
    );
  }

  /** The newest message a visitor can see (tool activity is not) of each conversation: the previews of a conversation list. */
  async latestVisibleTexts(em: EntityManager, conversationIds: string[]): Promise<Map<string, string>> {
    if (!conversationIds.length) return new Map();
    // raw SQL: the newest row of each conversation (distinct on) has no ORM form; one statement for the whole page.
    // eslint-disable-next-line no-restricted-syntax
    const rows = await em.execute<Array<{ conversation_id: string; text: string }>>(
      `select distinct on (conversation_id) conversation_id, text from chat_messages
       where conversation_id in (${conversationIds.map(() => '?').join(', ')}) and role <> 'tool'
       order by conversation_id, created_at desc, id desc`,
      conversationIds,
    );
    return new Map(rows.map((r) => [r.conversation_id, r.text]));
  }
}
