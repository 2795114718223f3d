import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 31, the operators' inbox: who holds a conversation (`assignee_id`, one person at most: the take is a
 * conditional UPDATE … WHERE assignee_id IS NULL), since when it waits for a person (`queued_at`, the queue's order)
 * and since when it is held (`assigned_at`), why it was closed; full-text search over the transcript (a GIN index of
 * the 'simple' configuration: no stemming, so any language's words match as written); the team's internal notes
 * (never in the widget's history or webhooks), canned replies per workspace, each person's inbox presence (the live
 * stream's last heartbeat, away, capacity) and the workspace's automatic assignment switch.
 */
export class Migration20261128220000Inbox extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      alter table conversations
        add column assignee_id text references console_users(id) on delete set null,
        add column queued_at timestamptz,
        add column assigned_at timestamptz,
        add column close_reason text check (char_length(close_reason) between 1 and 500)`);
    // The inbox's list: a workspace's conversations by newest activity; the queue: those waiting, oldest first.
    this.addSql(`create index conversations_inbox_idx on conversations (workspace_id, updated_at desc, id desc)`);
    this.addSql(`create index conversations_queue_idx on conversations (workspace_id, queued_at, id) where status = 'open' and needs_human and assignee_id is null`);
    this.addSql(`create index conversations_assignee_idx on conversations (assignee_id) where status = 'open' and assignee_id is not null`);
    this.addSql(`create index chat_messages_text_fts_idx on chat_messages using gin (to_tsvector('simple', text)) where role <> 'tool'`);
    this.addSql(`update conversations set queued_at = updated_at where needs_human and status = 'open'`);
    // Every path that hands a conversation to a person (the agent's handoff tool, PATCH needs_human, a take) queues it,
    // and every path that gives it back to the agent takes it out of the queue and from its holder: one rule, here.
    // Every change is told to the inbox's live streams on their channel, inbox_changes (api/inbox-hub.ts): a NOTIFY in
    // the writer's transaction, sent at its commit, so a console reads what it was told about.
    this.addSql(`
      create function conversations_inbox() returns trigger language plpgsql as $$
      declare
        what text := 'activity';
      begin
        if tg_op = 'INSERT' then
          what := 'new';
        else
          if new.needs_human and not old.needs_human then
            new.queued_at := coalesce(new.queued_at, now());
          elsif old.needs_human and not new.needs_human then
            new.queued_at := null;
            new.assignee_id := null;
            new.assigned_at := null;
          end if;
          if new.needs_human is distinct from old.needs_human then what := 'handoff';
          elsif new.assignee_id is distinct from old.assignee_id then what := 'assignment';
          elsif new.status is distinct from old.status then what := 'status';
          end if;
        end if;
        perform pg_notify('inbox_changes', json_build_object('k', 'inbox', 'w', new.workspace_id, 'c', new.id, 'e', what, 'h', new.needs_human and new.assignee_id is null and new.status = 'open')::text);
        return new;
      end $$`);
    this.addSql(`create trigger conversations_inbox before insert or update on conversations for each row execute function conversations_inbox()`);
    this.addSql(`
      create table conversation_notes (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        conversation_id text not null references conversations(id) on delete cascade,
        author_id text references console_users(id) on delete set null,
        author_email text not null,
        text text not null check (char_length(text) between 1 and 5000),
        created_at timestamptz(3) not null default clock_timestamp()
      )`);
    this.addSql(`create index conversation_notes_conversation_idx on conversation_notes (conversation_id, created_at)`);
    this.addSql(`
      create table canned_replies (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        title text not null check (char_length(title) between 1 and 100),
        text text not null check (char_length(text) between 1 and 4000),
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create unique index canned_replies_title_uq on canned_replies (workspace_id, lower(title))`);
    this.addSql(`
      create table inbox_agents (
        user_id text primary key references console_users(id) on delete cascade,
        workspace_id text not null references workspaces(id) on delete cascade,
        last_seen_at timestamptz,
        away boolean not null default false,
        capacity integer not null default 3 check (capacity between 0 and 100),
        last_assigned_at timestamptz
      )`);
    this.addSql(`create index inbox_agents_workspace_idx on inbox_agents (workspace_id)`);
    this.addSql(`
      create table inbox_settings (
        workspace_id text primary key references workspaces(id) on delete cascade,
        auto_assign boolean not null default false,
        updated_at timestamptz not null default now()
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop trigger if exists conversations_inbox on conversations');
    this.addSql('drop function if exists conversations_inbox()');
    this.addSql('drop table if exists inbox_settings');
    this.addSql('drop table if exists inbox_agents');
    this.addSql('drop table if exists canned_replies');
    this.addSql('drop table if exists conversation_notes');
    this.addSql('drop index if exists chat_messages_text_fts_idx');
    this.addSql('drop index if exists conversations_assignee_idx');
    this.addSql('drop index if exists conversations_queue_idx');
    this.addSql('drop index if exists conversations_inbox_idx');
    this.addSql('alter table conversations drop column close_reason, drop column assigned_at, drop column queued_at, drop column assignee_id');
  }
}
