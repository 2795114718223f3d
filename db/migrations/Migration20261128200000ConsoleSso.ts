import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 30, OpenID Connect sign-in per workspace: its settings (sso_settings: the client secret sealed), the email
 * domains it serves (sso_domains: a domain belongs to one workspace only, its primary key), and the bindings of console
 * users to an IdP's identities (user_identities: unique by issuer and subject, one per user and issuer; they go with
 * the user).
 */
export class Migration20261128200000ConsoleSso extends Migration {
  override async up(): Promise<void> {
    this.addSql(`
      create table sso_settings (
        workspace_id text primary key references workspaces(id) on delete cascade,
        issuer text not null check (char_length(issuer) between 1 and 2048),
        client_id text not null check (char_length(client_id) between 1 and 255),
        client_secret_sealed text not null,
        client_secret_last4 text not null,
        default_role text not null check (default_role in ('admin', 'agent', 'viewer')),
        enabled boolean not null,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`);
    this.addSql(`
      create table sso_domains (
        domain text primary key check (domain = lower(domain) and char_length(domain) between 1 and 253),
        workspace_id text not null references sso_settings(workspace_id) on delete cascade
      )`);
    this.addSql(`create index sso_domains_workspace_idx on sso_domains (workspace_id)`);
    this.addSql(`
      create table user_identities (
        id text primary key,
        user_id text not null references console_users(id) on delete cascade,
        workspace_id text not null references workspaces(id) on delete cascade,
        issuer text not null,
        subject text not null,
        email text not null,
        created_at timestamptz not null default now(),
        last_used_at timestamptz
      )`);
    this.addSql(`create unique index user_identities_subject_uniq on user_identities (issuer, subject)`);
    this.addSql(`create unique index user_identities_user_issuer_uniq on user_identities (user_id, issuer)`);
  }

  override async down(): Promise<void> {
    this.addSql('drop table if exists user_identities');
    this.addSql('drop table if exists sso_domains');
    this.addSql('drop table if exists sso_settings');
  }
}
