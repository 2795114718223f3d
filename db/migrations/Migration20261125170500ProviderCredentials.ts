import { Migration } from '@mikro-orm/migrations';

/**
 * Credentials for every provider (msgapp, llm, voice, telephony, mcp), registered through
 * the API. `kind` becomes `provider`: the existing `msgapp_access_token` rows are msgapp
 * credentials whose one secret is the access token, sealed as before, so agents naming
 * them keep working. `settings` holds the provider's non-secret fields; `fingerprint`
 * and `last4` (null on existing rows until first read, since SQL cannot open a secret)
 * describe the secret without revealing it. created_at moves to millisecond precision
 * for the keyset cursor of the list.
 */
export class Migration20261125170500ProviderCredentials extends Migration {
  override async up(): Promise<void> {
    this.addSql('alter table credentials drop constraint if exists credentials_kind_check');
    this.addSql('alter table credentials rename column kind to provider');
    this.addSql(`update credentials set provider = 'msgapp' where provider = 'msgapp_access_token'`);
    this.addSql(`alter table credentials add constraint credentials_provider_check check (provider in ('msgapp', 'llm', 'voice', 'telephony', 'mcp'))`);
    this.addSql(`alter table credentials add column settings jsonb not null default '{}'`);
    this.addSql('alter table credentials add column fingerprint text');
    this.addSql('alter table credentials add column last4 text');
    this.addSql('alter table credentials alter column created_at type timestamptz(3)');
    this.addSql('alter table credentials alter column created_at set default clock_timestamp()');
    this.addSql('create index credentials_workspace_created_idx on credentials (workspace_id, created_at desc, id desc)');
  }

  override async down(): Promise<void> {
    this.addSql('drop index if exists credentials_workspace_created_idx');
    // Only msgapp tokens existed before: the other providers' credentials cannot go back.
    this.addSql(`delete from credentials where provider <> 'msgapp'`);
    this.addSql('alter table credentials alter column created_at set default now()');
    this.addSql('alter table credentials alter column created_at type timestamptz');
    this.addSql('alter table credentials drop column last4');
    this.addSql('alter table credentials drop column fingerprint');
    this.addSql('alter table credentials drop column settings');
    this.addSql('alter table credentials drop constraint credentials_provider_check');
    this.addSql(`update credentials set provider = 'msgapp_access_token'`);
    this.addSql('alter table credentials rename column provider to kind');
    this.addSql(`alter table credentials add constraint credentials_kind_check check (kind in ('msgapp_access_token'))`);
  }
}
