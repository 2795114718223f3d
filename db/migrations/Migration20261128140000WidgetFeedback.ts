import { Migration } from '@mikro-orm/migrations';

/**
 * Visitors' feedback from the widget (issue 27, item 7): a thumbs up or down on an agent's
 * reply, and one 1-to-5 rating of the whole conversation. One row per subject, replaced in
 * place: the unique index on (conversation_id, reply_id) treats the conversation's rating
 * (reply_id null) as one more subject (`nulls not distinct`, PostgreSQL 15), so a repeated
 * rating replaces the first instead of adding a second. Scoped to workspace, site and
 * conversation; gone with any of them, and with the reply it judges.
 */
export class Migration20261128140000WidgetFeedback extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table widget_feedback (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        site_id text not null references sites(id) on delete cascade,
        -- The site's agent when the feedback was given (kept, as null, if the agent is deleted).
        agent_id text references agents(id) on delete set null,
        conversation_id text not null references conversations(id) on delete cascade,
        -- The agent reply judged; null: the rating of the conversation.
        reply_id text references chat_messages(id) on delete cascade,
        rating text check (rating in ('up', 'down')),
        score integer check (score between 1 and 5),
        comment text check (char_length(comment) between 1 and 1000),
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now(),
        -- A reply gets a thumb, a conversation a score; never both, never neither.
        constraint widget_feedback_kind_check check ((reply_id is not null and rating is not null and score is null) or (reply_id is null and rating is null and score is not null))
      )`);
    this.addSql(`create unique index widget_feedback_subject_uq on widget_feedback (conversation_id, reply_id) nulls not distinct`);
    // The analytics list (newest first, keyset) and the summary's counts over a window.
    this.addSql(`create index widget_feedback_ws_idx on widget_feedback (workspace_id, created_at desc, id desc)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists widget_feedback');
  }
}
