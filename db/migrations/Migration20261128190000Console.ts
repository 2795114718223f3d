import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 30, the console's foundation: its people (console_users), their server-side sessions (console_sessions: only
 * a SHA-256 hash of the cookie's token), their one-time links (console_links: sign-in, invitation, password reset;
 * only a hash of the token), the audit log (audit_events), and on api_keys the sealed value the console's "copy"
 * opens and the time of last use.
 *
 * audit_events is append-only in the database itself: a trigger raises on UPDATE and DELETE (row level) and on
 * TRUNCATE (statement level), whatever role or code path tries. It has no foreign key to workspaces for the same
 * reason: a cascade would be a DELETE. Its rows keep the actor's email as text, so removing a user keeps who did what.
 */
export class Migration20261128190000Console extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table api_keys add column sealed_value text, add column last_used_at timestamptz`);

    this.addSql(`
      create table console_users (
        id text primary key,
        workspace_id text not null references workspaces(id) on delete cascade,
        email text not null check (char_length(email) between 3 and 254),
        name text check (char_length(name) between 1 and 200),
        role text not null check (role in ('owner', 'admin', 'agent', 'viewer')),
        status text not null check (status in ('invited', 'active')),
        password_hash text,
        created_at timestamptz(3) not null default clock_timestamp(),
        last_sign_in_at timestamptz,
        password_changed_at timestamptz
      )`);
    // Email unique per workspace, case-insensitively; sign-in looks users up by lower(email).
    this.addSql(`create unique index console_users_email_uniq on console_users (workspace_id, lower(email))`);
    this.addSql(`create index console_users_email_idx on console_users (lower(email))`);

    this.addSql(`
      create table console_sessions (
        id text primary key,
        token_hash text not null unique,
        user_id text not null references console_users(id) on delete cascade,
        workspace_id text not null references workspaces(id) on delete cascade,
        csrf_token text not null,
        created_at timestamptz not null default now(),
        last_seen_at timestamptz not null default now(),
        expires_at timestamptz not null,
        revoked_at timestamptz,
        ip text,
        user_agent text
      )`);
    this.addSql(`create index console_sessions_user_idx on console_sessions (user_id) where revoked_at is null`);

    this.addSql(`
      create table console_links (
        id text primary key,
        token_hash text not null unique,
        kind text not null check (kind in ('sign_in', 'invitation', 'password_reset')),
        user_id text not null references console_users(id) on delete cascade,
        workspace_id text not null references workspaces(id) on delete cascade,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        used_at timestamptz
      )`);
    this.addSql(`create index console_links_user_idx on console_links (user_id)`);

    this.addSql(`
      create table audit_events (
        id text primary key,
        workspace_id text,
        created_at timestamptz(3) not null default clock_timestamp(),
        action text not null,
        actor_type text not null check (actor_type in ('user', 'key', 'cli', 'anonymous', 'system')),
        actor_id text,
        actor_email text,
        ip text,
        user_agent text,
        target_type text,
        target_id text,
        details jsonb not null default '{}'
      )`);
    this.addSql(`create index audit_events_workspace_idx on audit_events (workspace_id, created_at desc, id desc)`);
    this.addSql(`
      create function audit_events_append_only() returns trigger language plpgsql as $$
      begin
        raise exception 'audit_events is append-only: % refused', tg_op using errcode = 'insufficient_privilege';
      end $$`);
    this.addSql(`create trigger audit_events_no_change before update or delete on audit_events for each row execute function audit_events_append_only()`);
    this.addSql(`create trigger audit_events_no_truncate before truncate on audit_events for each statement execute function audit_events_append_only()`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists audit_events');
    this.addSql('drop function if exists audit_events_append_only()');
    this.addSql('drop table if exists console_links');
    this.addSql('drop table if exists console_sessions');
    this.addSql('drop table if exists console_users');
    this.addSql('alter table api_keys drop column if exists sealed_value, drop column if exists last_used_at');
  }
}
