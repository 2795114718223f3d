import { Migration } from '@mikro-orm/migrations';

/** Workspaces, API keys, knowledge-base folders and stored Idempotency-Key responses. */
export class Migration20261122000100Foundation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table workspaces (
        id text primary key,
        name text not null,
        created_at timestamptz not null default now()
      )`);

    this.addSql(`
      create table api_keys (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        name text not null,
        prefix text not null,
        secret_hash text not null unique,
        scopes text[] not null,
        status text not null check (status in ('active', 'revoked')),
        created_at timestamptz not null default now(),
        rotated_at timestamptz,
        revoked_at timestamptz
      )`);
    this.addSql(`create index api_keys_workspace_idx on api_keys (workspace_id, created_at)`);

    this.addSql(`
      create table api_key_retired_secrets (
        secret_hash text primary key,
        key_id text not null references api_keys(id) on delete cascade,
        retired_at timestamptz not null default now()
      )`);

    // Folders form a tree per workspace. "on delete restrict" on parent_id makes a
    // concurrent child insert and a folder delete serialise: the delete cannot leave an
    // orphan, whatever the interleaving.
    this.addSql(`
      create table kb_folders (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        parent_id text references kb_folders(id) on delete restrict,
        name text not null check (char_length(name) between 1 and 200),
        path text not null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    // Sibling names are unique; top-level folders share the parent '' in this index.
    this.addSql(`create unique index kb_folders_sibling_name_uq on kb_folders (workspace_id, coalesce(parent_id, ''), name)`);
    this.addSql(`create index kb_folders_parent_idx on kb_folders (parent_id)`);

    this.addSql(`
      create table idempotency_keys (
        workspace_id text not null references workspaces(id) on delete cascade,
        key text not null,
        request_hash text not null,
        state text not null check (state in ('in_progress', 'completed')),
        response_status integer,
        response_body text,
        response_content_type text,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        primary key (workspace_id, key)
      )`);
    this.addSql(`create index idempotency_keys_expires_idx on idempotency_keys (expires_at)`);

  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists idempotency_keys');
    this.addSql('drop table if exists kb_folders');
    this.addSql('drop table if exists api_key_retired_secrets');
    this.addSql('drop table if exists api_keys');
    this.addSql('drop table if exists workspaces');
  }
}
