import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { WidgetFeedback, type IWidgetFeedback } from '../../db/entities';
import type { ChatTranscript } from '../chat/transcript';
import { DomainError } from '../errors';
import { newId } from '../../lib/ids';
import { keysetFind } from '../../db/pagination';
import type { SiteRow } from './sites';

/** Longest comment a visitor may leave with a thumb or a rating (characters). */
export const FEEDBACK_COMMENT_MAX = 1000;

export type Thumb = 'up' | 'down';

/** What the widget is answered: the feedback as stored now (`rating: null`: none). */
export interface ReplyFeedbackView {
  conversation_id: string;
  reply_id: string;
  rating: Thumb | null;
  comment: string | null;
  updated_at: string;
}

export interface ConversationRatingView {
  conversation_id: string;
  score: number | null;
  comment: string | null;
  updated_at: string;
}

/** One row as the analytics list shows it. */
export interface FeedbackView {
  id: string;
  kind: 'reply' | 'conversation';
  conversation_id: string;
  reply_id: string | null;
  site_id: string;
  agent_id: string | null;
  rating: Thumb | null;
  score: number | null;
  comment: string | null;
  created_at: string;
  updated_at: string;
}

export interface FeedbackCounts {
  up: number;
  down: number;
  ratings: number;
  average_rating: number | null;
}

export interface FeedbackListQuery {
  kind?: 'reply' | 'conversation';
  rating?: Thumb;
  score?: number;
  agent_id?: string;
  site_id?: string;
  conversation_id?: string;
  since?: string;
  until?: string;
  limit: number;
  cursor?: string;
}

const view = (r: IWidgetFeedback): FeedbackView => ({
  id: r.id,
  kind: r.replyId ? 'reply' : 'conversation',
  conversation_id: r.conversationId,
  reply_id: r.replyId ?? null,
  site_id: r.siteId,
  agent_id: r.agentId ?? null,
  rating: r.rating ?? null,
  score: r.score ?? null,
  comment: r.comment ?? null,
  created_at: r.createdAt.toISOString(),
  updated_at: r.updatedAt.toISOString(),
});

/** A comment as stored: trimmed, and none when blank. Shown only as text, never as markup. */
const commentOf = (c: string | null | undefined): string | null => (c?.trim() ? c.trim() : null);

/**
 * Visitors' feedback (the only owner of `widget_feedback`): one thumb per agent reply and
 * one rating per conversation, each replaced by the next one sent. The caller has already
 * checked that the conversation is the site's and the visitor's (WidgetSessionService.authorize).
 */
export class FeedbackService {
  constructor(
    private readonly em: EntityManager,
    private readonly transcript: Pick<ChatTranscript, 'get'>,
  ) {}

  /**
   * A thumb on reply `replyId` of the conversation: stored, replacing any earlier one (comment included), or cleared
   * (`rating: null`). Only an agent's reply in this very conversation can be judged: a visitor's message, a human
   * agent's, tool activity or another conversation's reply is 404, as an unknown id is (nothing about other
   * conversations is revealed). `created`: no feedback on that reply existed before.
   */
  async rateReply(
    site: SiteRow,
    conversationId: string,
    f: { reply_id: string; rating: Thumb | null; comment?: string | null },
  ): Promise<{ created: boolean; feedback: ReplyFeedbackView }> {
    const reply = await this.transcript.get(f.reply_id);
    if (!reply || reply.conversation_id !== conversationId || reply.role !== 'assistant') {
      throw new DomainError('not_found', `reply_id: no reply of the agent with id '${f.reply_id}' in conversation '${conversationId}'`);
    }
    const stored = await this.put(site, conversationId, reply.id, f.rating === null ? null : { rating: f.rating, score: null, comment: commentOf(f.comment) });
    return {
      created: stored.created,
      feedback: { conversation_id: conversationId, reply_id: reply.id, rating: stored.row?.rating ?? null, comment: stored.row?.comment ?? null, updated_at: stored.at.toISOString() },
    };
  }

  /** The visitor's 1-to-5 rating of the conversation, replacing any earlier one, or cleared (`score: null`). */
  async rateConversation(site: SiteRow, conversationId: string, f: { score: number | null; comment?: string | null }): Promise<{ created: boolean; rating: ConversationRatingView }> {
    const stored = await this.put(site, conversationId, null, f.score === null ? null : { rating: null, score: f.score, comment: commentOf(f.comment) });
    return { created: stored.created, rating: { conversation_id: conversationId, score: stored.row?.score ?? null, comment: stored.row?.comment ?? null, updated_at: stored.at.toISOString() } };
  }

  /**
   * Upserts (or deletes, `value` null) the one row of a subject: insert, or on the unique (conversation_id, reply_id)
   * replace its value, keeping its id and created_at (the list's cursor position stays put).
   */
  private async put(
    site: SiteRow,
    conversationId: string,
    replyId: string | null,
    value: { rating: Thumb | null; score: number | null; comment: string | null } | null,
  ): Promise<{ created: boolean; row: IWidgetFeedback | null; at: Date }> {
    const em = this.em.fork();
    const subject = { conversationId, replyId };
    const at = new Date();
    if (!value) {
      await em.nativeDelete(WidgetFeedback, { workspaceId: site.workspace_id, ...subject });
      return { created: false, row: null, at };
    }
    const existed = (await em.count(WidgetFeedback, subject)) > 0;
    await em
      .createQueryBuilder(WidgetFeedback)
      .insert({ id: newId('fbk'), workspaceId: site.workspace_id, siteId: site.id, agentId: site.agent_id, ...subject, ...value, updatedAt: at })
      .onConflict(['conversationId', 'replyId'])
      .merge(['rating', 'score', 'comment', 'updatedAt']);
    const row = await em.findOneOrFail(WidgetFeedback, subject);
    return { created: !existed, row, at: row.updatedAt };
  }

  /** The workspace's feedback, newest first (by when it was first given), filtered; a keyset page. */
  async list(workspaceId: string, q: FeedbackListQuery): Promise<{ feedback: FeedbackView[]; next_cursor: string | null }> {
    const where: FilterQuery<IWidgetFeedback>[] = [{ workspaceId }];
    if (q.kind === 'reply') where.push({ replyId: { $ne: null } });
    if (q.kind === 'conversation') where.push({ replyId: null });
    if (q.rating) where.push({ rating: q.rating });
    if (q.score !== undefined) where.push({ score: q.score });
    if (q.agent_id) where.push({ agentId: q.agent_id });
    if (q.site_id) where.push({ siteId: q.site_id });
    if (q.conversation_id) where.push({ conversationId: q.conversation_id });
    if (q.since) where.push({ createdAt: { $gte: new Date(q.since) } });
    if (q.until) where.push({ createdAt: { $lt: new Date(q.until) } });
    const page = await keysetFind(this.em.fork(), WidgetFeedback, { $and: where }, q);
    return { feedback: page.rows.map(view), next_cursor: page.next_cursor };
  }

  /** Thumbs and ratings first given in `[from, to)`: the analytics summary's `feedback`. */
  async counts(workspaceId: string, w: { from: Date; to: Date }): Promise<FeedbackCounts> {
    // raw SQL: four aggregates with filters in one scan have no ORM form.
    // eslint-disable-next-line no-restricted-syntax
    const [row] = await this.em.fork().getConnection().execute<Array<{ up: string; down: string; ratings: string; average: string | null }>>(
      `select count(*) filter (where rating = 'up') as up, count(*) filter (where rating = 'down') as down,
              count(score) as ratings, avg(score) as average
       from widget_feedback where workspace_id = ? and created_at >= ? and created_at < ?`,
      [workspaceId, w.from, w.to],
    );
    return {
      up: Number(row.up),
      down: Number(row.down),
      ratings: Number(row.ratings),
      average_rating: row.average === null ? null : Math.round(Number(row.average) * 100) / 100,
    };
  }
}
