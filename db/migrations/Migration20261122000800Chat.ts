import { Migration } from '@mikro-orm/migrations';

/**
 * Web chat: the transcript of widget conversations, visitor uploads (with the passages
 * of long ones), and the background tasks of a conversation's actor.
 */
export class Migration20261122000800Chat extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table conversations add column site_id text references sites(id) on delete set null`);
    this.addSql(`alter table conversations add column title text`);
    this.addSql(`alter table conversations add column closed_at timestamptz`);

    this.addSql(`
      create table chat_messages (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        conversation_id text not null references conversations(id) on delete cascade,
        -- user: the visitor; assistant: the agent; human: a human agent; tool: tool activity (never in history).
        role text not null check (role in ('user', 'assistant', 'human', 'tool')),
        -- The visitor client's own id for a message: a repeated send is the same message.
        client_message_id text,
        -- For an assistant reply: the visitor message it answers.
        reply_to text,
        text text not null default '',
        -- Upload ids attached (visitor) or attachment records (assistant).
        attachments jsonb not null default '[]',
        -- charts, cards, rich, suggested_actions, citations: only the non-empty ones.
        extras jsonb not null default '{}',
        unsolicited boolean not null default false,
        created_at timestamptz(3) not null default clock_timestamp()
      )`);
    this.addSql(`create unique index chat_messages_client_uq on chat_messages (conversation_id, client_message_id) where client_message_id is not null`);
    this.addSql(`create index chat_messages_conv_idx on chat_messages (conversation_id, created_at desc, id desc)`);

    this.addSql(`
      create table widget_uploads (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        site_id text not null references sites(id) on delete cascade,
        conversation_id text references conversations(id) on delete cascade,
        file_name text not null,
        mime_type text not null,
        size_bytes bigint not null,
        blob_key text not null,
        status text not null check (status in ('processing', 'ready', 'error')),
        content text,
        parsed_chars integer,
        summary text,
        error_message text,
        created_at timestamptz(3) not null default clock_timestamp(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`create index widget_uploads_conv_idx on widget_uploads (conversation_id, status)`);
    // Knowledge-base deletions look here before removing bytes both share.
    this.addSql(`create index widget_uploads_blob_idx on widget_uploads (blob_key)`);

    this.addSql(`
      create table widget_upload_chunks (
        upload_id text not null references widget_uploads(id) on delete cascade,
        ord integer not null,
        text text not null,
        embedding real[],
        -- The model that made the vector: search compares only vectors of the current model.
        embedding_model text,
        primary key (upload_id, ord)
      )`);

    this.addSql(`
      create table conversation_tasks (
        conversation_id text not null references conversations(id) on delete cascade,
        task_key text not null,
        workspace_id text not null references workspaces(id) on delete cascade,
        kind text not null,
        label text not null,
        status text not null check (status in ('running', 'completed', 'cancelled', 'failed')),
        blocking boolean not null default false,
        workflow_id text not null,
        error text,
        started_at timestamptz(3) not null default clock_timestamp(),
        finished_at timestamptz(3),
        primary key (conversation_id, task_key)
      )`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists conversation_tasks');
    this.addSql('drop table if exists widget_upload_chunks');
    this.addSql('drop table if exists widget_uploads');
    this.addSql('drop table if exists chat_messages');
    this.addSql('alter table conversations drop column if exists closed_at');
    this.addSql('alter table conversations drop column if exists title');
    this.addSql('alter table conversations drop column if exists site_id');
  }
}
