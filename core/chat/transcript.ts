import type { EntityManager } from '@mikro-orm/postgresql';

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

/** The optional parts of a reply; only non-empty ones are stored and sent. */
export interface ReplyExtras {
  charts?: unknown[];
  cards?: unknown[];
  rich?: unknown[];
  suggested_actions?: string[];
  /** The knowledge-base passages the reply drew on: file names shown to the visitor. */
  citations?: Array<{ file_id: string; file_name: string }>;
}

export interface HistoryMessage {
  id: string;
  role: 'user' | 'assistant';
  text: string;
  timestamp: string;
  attachments: unknown[];
  /** A human agent wrote it (role is then `assistant`). */
  author?: 'human';
  charts?: unknown[];
  cards?: unknown[];
  rich?: unknown[];
  suggested_actions?: string[];
}

/** The persisted reply as the socket's `reply` frame carries it (optional fields only when non-empty). */
export function replyFrame(row: Pick<ChatMessageRow, 'id' | 'text' | 'attachments' | 'extras' | 'unsolicited'>) {
  const e = row.extras ?? {};
  return {
    type: 'reply' as const,
    reply_id: row.id,
    text: row.text,
    ...(row.attachments?.length ? { attachments: row.attachments } : {}),
    ...(e.charts?.length ? { charts: e.charts } : {}),
    ...(e.cards?.length ? { cards: e.cards } : {}),
    ...(e.rich?.length ? { rich: e.rich } : {}),
    ...(e.suggested_actions?.length ? { suggested_actions: e.suggested_actions } : {}),
    ...(row.unsolicited ? { unsolicited: true as const } : {}),
  };
}

/** Keeps only the non-empty extras. */
export function compactExtras(e: ReplyExtras): ReplyExtras {
  return Object.fromEntries(Object.entries(e).filter(([, v]) => Array.isArray(v) && v.length)) as ReplyExtras;
}

/**
 * The transcript of web conversations. Every message (visitor, agent, human agent,
 * tool activity) is a row; inserts are idempotent on their id (and, for the visitor,
 * on the client's message id), so a retried activity never writes a message twice.
 * Within a conversation timestamps strictly increase, so a timestamp is a safe cursor.
 */
export class ChatTranscript {
  constructor(private readonly em: EntityManager) {}

  /**
   * Appends a message unless one with the same id (or the same client message id) is
   * there already; returns the stored row either way.
   */
  async append(m: {
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
  }): Promise<{ row: ChatMessageRow; created: boolean }> {
    const em = this.em.fork();
    // Strictly increasing per conversation (1 ms after the newest), so `before` never splits a tie.
    const inserted = await em.execute<ChatMessageRow[]>(
      `insert into chat_messages (id, workspace_id, conversation_id, role, client_message_id, reply_to, text, attachments, extras, unsolicited, created_at)
       select ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?,
              greatest(clock_timestamp(), (select max(created_at) + interval '1 millisecond' from chat_messages where conversation_id = ?))
       on conflict do nothing returning *`,
      [
        m.id,
        m.workspaceId,
        m.conversationId,
        m.role,
        m.clientMessageId ?? null,
        m.replyTo ?? null,
        m.text,
        JSON.stringify(m.attachments ?? []),
        JSON.stringify(compactExtras(m.extras ?? {})),
        m.unsolicited ?? false,
        m.conversationId,
      ],
    );
    if (inserted.length) {
      await em.execute(`update conversations set updated_at = now(), title = coalesce(title, ?) where id = ?`, [
        m.role === 'user' && m.text ? m.text.slice(0, 80) : null,
        m.conversationId,
      ]);
      return { row: inserted[0], created: true };
    }
    const [existing] = await em.execute<ChatMessageRow[]>(
      `select * from chat_messages where id = ? or (conversation_id = ? and client_message_id = ?) order by (id = ?) desc limit 1`,
      [m.id, m.conversationId, m.clientMessageId ?? null, m.id],
    );
    if (!existing) throw new Error(`chat message ${m.id} was neither inserted nor found`);
    return { row: existing, created: false };
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
   * unanswered visitor message goes.
   */
  async withdraw(conversationId: string, messageId: string): Promise<void> {
    await this.em
      .fork()
      .execute(`delete from chat_messages m where m.id = ? and m.conversation_id = ? and m.role = 'user' and not exists (select 1 from chat_messages r where r.reply_to = m.id)`, [
        messageId,
        conversationId,
      ]);
  }

  async get(id: string): Promise<ChatMessageRow | null> {
    const [row] = await this.em.fork().execute<ChatMessageRow[]>('select * from chat_messages where id = ?', [id]);
    return row ?? null;
  }

  /** The stored reply to a visitor message, if any. */
  async replyTo(messageId: string): Promise<ChatMessageRow | null> {
    const [row] = await this.em.fork().execute<ChatMessageRow[]>(`select * from chat_messages where reply_to = ? and role = 'assistant' order by created_at limit 1`, [messageId]);
    return row ?? null;
  }

  /** The last `n` messages before (and excluding) `untilId`'s turn, oldest first: the model's context. */
  async recent(conversationId: string, n: number): Promise<ChatMessageRow[]> {
    const rows = await this.em
      .fork()
      .execute<ChatMessageRow[]>(`select * from chat_messages where conversation_id = ? order by created_at desc, id desc limit ?`, [conversationId, n]);
    return rows.reverse();
  }

  /** Replies (agent or human) written after message `afterId`: what a reconnecting socket missed. */
  async repliesAfter(conversationId: string, afterId: string): Promise<ChatMessageRow[]> {
    return this.em.fork().execute<ChatMessageRow[]>(
      `select m.* from chat_messages m
       where m.conversation_id = ? and m.role in ('assistant', 'human')
         and m.created_at > (select created_at from chat_messages where id = ? and conversation_id = ?)
       order by m.created_at, m.id`,
      [conversationId, afterId, conversationId],
    );
  }

  /**
   * One page of the visitor-facing transcript: the latest `limit` messages strictly older
   * than `before`, oldest first. Tool activity is never shown.
   */
  async history(
    conversationId: string,
    q: { limit: number; before?: string },
    resignAttachments: (attachments: unknown[]) => Promise<unknown[]>,
  ): Promise<{ messages: HistoryMessage[]; has_more: boolean; next_before: string | null }> {
    const before = q.before && !Number.isNaN(Date.parse(q.before)) ? new Date(q.before) : null;
    const rows = await this.em.fork().execute<ChatMessageRow[]>(
      `select * from chat_messages where conversation_id = ? and role <> 'tool' ${before ? 'and created_at < ?' : ''}
       order by created_at desc, id desc limit ?`,
      before ? [conversationId, before, q.limit + 1] : [conversationId, q.limit + 1],
    );
    const has_more = rows.length > q.limit;
    const page = rows.slice(0, q.limit).reverse();
    const messages: HistoryMessage[] = [];
    for (const r of page) {
      const e = r.extras ?? {};
      messages.push({
        id: r.id,
        role: r.role === 'user' ? 'user' : 'assistant',
        text: r.text,
        timestamp: new Date(r.created_at).toISOString(),
        attachments: r.attachments?.length ? await resignAttachments(r.attachments) : [],
        ...(r.role === 'human' ? { author: 'human' as const } : {}),
        ...(e.charts?.length ? { charts: e.charts } : {}),
        ...(e.cards?.length ? { cards: e.cards } : {}),
        ...(e.rich?.length ? { rich: e.rich } : {}),
        ...(e.suggested_actions?.length ? { suggested_actions: e.suggested_actions } : {}),
      });
    }
    return { messages, has_more, next_before: page.length ? new Date(page[0].created_at).toISOString() : null };
  }
}
